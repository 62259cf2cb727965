// How the published runner is bundled: which npm dependencies stay imports, and what goes into
// the bundle in their place. One bundled file holds the runner and the frameworks it serves
// requests with, because a module Node loads from node_modules costs a module record, its
// wrapper and its own source string for the runner's whole life (docs/MEMORY.md, "One bundled
// file").
import type { Plugin } from 'esbuild'

/**
 * npm dependencies that stay imports resolved from node_modules beside the package, each loaded
 * only on first use: ssh2 (the ssh driver; optional native parts and WebAssembly), the MCP SDK
 * (`conch mcp`; it brings express, hono and its own ajv), @peculiar/x509 and reflect-metadata
 * (the egress CA). The @xterm packages are dependencies too, but the console serves their files
 * by path and never imports them.
 */
export const LOADED_FROM_NODE_MODULES: readonly string[] = [
  'ssh2',
  '@modelcontextprotocol/sdk',
  '@peculiar/x509',
  'reflect-metadata',
  '@xterm/xterm',
  '@xterm/addon-fit',
]

/**
 * Gives bundled CommonJS a real `require`: esbuild's ESM output turns each `require()` it cannot
 * bundle (Node built-ins in CommonJS dependencies, ws's optional native add-ons) into a call of
 * a `require` it expects the module to have.
 */
export const COMMONJS_REQUIRE_BANNER =
  "import { createRequire as __conchCreateRequire } from 'node:module'; const require = __conchCreateRequire(import.meta.url);"

/**
 * zod's `z.locales`: every language's error messages (64 files, ~370 KB of source), imported
 * by zod's classic and core entries only to be re-exported. The runner uses none of them (zod
 * registers English itself, from its own import of `locales/en.js`), so the bundle gets an
 * empty module instead.
 */
export const NO_ZOD_LOCALES: Plugin = {
  name: 'no-zod-locales',
  setup(build) {
    build.onResolve({ filter: /^\.\.\/locales\/index\.js$/ }, (args) =>
      /[/\\]zod[/\\]v4[/\\](classic|core)[/\\]/.test(args.importer)
        ? { path: 'zod-locales', namespace: 'empty' }
        : undefined,
    )
    build.onLoad({ filter: /.*/, namespace: 'empty' }, () => ({ contents: 'export {}', loader: 'js' }))
  },
}
