// @ts-check
// The docs site. Reference pages under src/content/docs/reference/generated/ are written at
// build time: by scripts/generate-reference.ts (REST, WebSocket, errors) and by starlight-typedoc
// (the SDK, from packages/sdk's TSDoc). Nothing is fetched from the network.

import { fileURLToPath } from 'node:url'
import starlight from '@astrojs/starlight'
import { defineConfig } from 'astro/config'
import starlightLinksValidator from 'starlight-links-validator'
import starlightTypeDoc, { typeDocSidebarGroup } from 'starlight-typedoc'

/**
 * Where the site is served: sitemap, canonical links and `og:url` are built from it. The
 * default is a placeholder (`.example` is reserved for examples); set CONCH_DOCS_SITE to the
 * real docs host when building for it.
 */
const site = process.env.CONCH_DOCS_SITE || 'https://docs.conch.example'

export default defineConfig({
  site,
  vite: {
    build: {
      rollupOptions: {
        // MDX pages compile to modules with Astro's "use astro:head-inject" directive, which the
        // bundler reports once per page; it is expected and harmless.
        onwarn(warning, warn) {
          if (warning.code !== 'MODULE_LEVEL_DIRECTIVE') warn(warning)
        },
      },
    },
  },
  integrations: [
    starlight({
      title: 'conch',
      description: 'Persistent, stateful bash sessions for AI agents, in sandboxes you run yourself.',
      lastUpdated: false,
      customCss: ['./src/styles/tables.css'],
      pagefind: true,
      plugins: [
        starlightLinksValidator({ errorOnRelativeLinks: true, errorOnInvalidHashes: true }),
        starlightTypeDoc({
          entryPoints: ['../../packages/sdk/src/index.ts'],
          // Only the SDK's sources, never its tests: the reference documents the public entry.
          tsconfig: './tsconfig.typedoc.json',
          output: 'reference/sdk',
          sidebar: { label: 'SDK', collapsed: true },
          typeDoc: {
            disableSources: true,
            // The SDK's own typecheck owns type errors; the reference is generated regardless.
            skipErrorChecking: true,
            excludePrivate: true,
            excludeInternal: true,
            readme: 'none',
            // The index: one section per topic, each export with its TSDoc summary.
            plugin: [fileURLToPath(new URL('./scripts/sdk-reference-groups.ts', import.meta.url))],
            categorizeByGroup: false,
            categoryOrder: ['Sandbox', 'Shell', 'Session', 'Processes', 'Files', 'Errors', 'Connection', '*'],
            indexFormat: 'table',
            entryFileName: 'index',
          },
        }),
      ],
      sidebar: [
        { label: 'Start', items: ['quickstart'] },
        {
          label: 'Concepts',
          items: [
            'concepts/sandboxes-sessions-shells',
            'concepts/exec-vs-shell',
            'concepts/run-promises',
            'concepts/framing',
            'concepts/timeouts-and-interrupts',
            'concepts/reattach',
            'concepts/snapshots',
            'concepts/limits',
            'concepts/security',
          ],
        },
        {
          label: 'Guides',
          items: [
            'guides/agent-loop',
            'guides/mcp',
            'guides/streaming-to-a-ui',
            'guides/reattach-from-another-process',
            'guides/sessions',
            'guides/background-servers',
            'guides/checkpoint-and-roll-back',
            'guides/networking',
            'guides/terminals',
            'guides/files',
            'guides/browser-token',
            'guides/production',
            'guides/deploy',
            'guides/ssh',
          ],
        },
        {
          label: 'Reference',
          items: [
            typeDocSidebarGroup,
            'reference/rest-api',
            'reference/websocket',
            'reference/errors',
            'reference/cli',
          ],
        },
        { label: 'Project', items: ['benchmarks', 'comparison'] },
      ],
    }),
  ],
})
