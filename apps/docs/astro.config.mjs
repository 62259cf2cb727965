// @ts-check
// The docs site. Reference pages under src/content/docs/reference/generated/ are written at
// build time: by scripts/generate-reference.ts (REST, WebSocket, errors) and by starlight-typedoc
// (the SDK, from packages/sdk's TSDoc). Nothing is fetched from the network.
import starlight from '@astrojs/starlight'
import { defineConfig } from 'astro/config'
import starlightLinksValidator from 'starlight-links-validator'
import starlightTypeDoc, { typeDocSidebarGroup } from 'starlight-typedoc'

export default defineConfig({
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
      pagefind: true,
      plugins: [
        starlightLinksValidator({ errorOnRelativeLinks: true, errorOnInvalidHashes: true }),
        starlightTypeDoc({
          entryPoints: ['../../packages/sdk/src/index.ts'],
          // Only the SDK's sources, never its tests: the reference documents the public entry.
          tsconfig: './tsconfig.typedoc.json',
          output: 'reference/generated/sdk',
          sidebar: { label: 'SDK', collapsed: true },
          typeDoc: {
            disableSources: true,
            // The SDK's own typecheck owns type errors; the reference is generated regardless.
            skipErrorChecking: true,
            excludePrivate: true,
            excludeInternal: true,
            readme: 'none',
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
            'concepts/limits',
            'concepts/security',
          ],
        },
        {
          label: 'Guides',
          items: [
            'guides/agent-loop',
            'guides/streaming-to-a-ui',
            'guides/reattach-from-another-process',
            'guides/sessions',
            'guides/background-servers',
            'guides/files',
            'guides/browser-token',
            'guides/production',
            'guides/deploy',
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
