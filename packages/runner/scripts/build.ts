// Builds the publishable runner into dist/: `conch.js` (the bin: a Node version check that loads
// the CLI), the CLI and runner code with @conch/protocol, @conch/link and the npm packages it
// serves requests with (fastify, ws, pino, prom-client, zod) bundled in (the dependencies it
// loads on first use stay imports: runner-bundle.ts), and `conch-agent.mjs`, the agent bundle
// every driver runs. Nothing in dist/ imports a workspace package; `node-pty/` holds node-pty's
// runtime files for terminals. Run by `pnpm build` (turbo) and before `pnpm pack`.
//
//   node --conditions=source scripts/build.ts
import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { build } from 'esbuild'
import {
  AGENT_BUNDLE_FILE,
  AGENT_BUNDLE_TARGET,
  asciiSource,
  resolveAgentEntry,
  writeAgentBundle,
} from '../src/drivers/agent-bundle.ts'
import { nodePtyPackageDir, PTY_RUNTIME_DIR, writePtyRuntime } from '../src/drivers/pty-runtime.ts'
import { COMMONJS_REQUIRE_BANNER, LOADED_FROM_NODE_MODULES, NO_ZOD_LOCALES } from './runner-bundle.ts'

const root = join(import.meta.dirname, '..')
const dist = join(root, 'dist')

rmSync(dist, { recursive: true, force: true })
await build({
  entryPoints: { conch: join(root, 'src', 'bin.ts') },
  outdir: dist,
  bundle: true,
  // The bin must stay a file that an old Node can run up to its version check: the CLI goes
  // into a chunk that the check imports only once the version is right.
  splitting: true,
  chunkNames: 'runner-[hash]',
  platform: 'node',
  format: 'esm',
  target: AGENT_BUNDLE_TARGET,
  conditions: ['source'],
  // Workspace packages and the frameworks are bundled; what is loaded on first use stays an
  // import of the dependency installed beside the package; esbuild serves only the checkout's
  // lazy agent build (agent-bundle.ts), which the published package never reaches.
  external: [...LOADED_FROM_NODE_MODULES, 'esbuild'],
  banner: { js: COMMONJS_REQUIRE_BANNER },
  plugins: [NO_ZOD_LOCALES],
  legalComments: 'none',
  // Non-ASCII in strings and regexps is escaped; asciiSource below escapes what esbuild leaves
  // in comments. V8 holds each chunk's source for the runner's whole life, and one non-ASCII
  // character makes it hold the whole chunk as UTF-16, twice its size (docs/MEMORY.md).
  charset: 'ascii',
  logLevel: 'warning',
})
for (const file of readdirSync(dist).filter((f) => f.endsWith('.js'))) {
  const path = join(dist, file)
  const text = readFileSync(path, 'utf8')
  const ascii = asciiSource(text)
  if (ascii !== text) writeFileSync(path, ascii)
}
await writeAgentBundle(resolveAgentEntry(), join(dist, AGENT_BUNDLE_FILE))
// node-pty's runtime (its JavaScript and the addon built at install) beside the agent bundle,
// so terminals work in every driver without node-pty being installed beside the runner.
writePtyRuntime(nodePtyPackageDir(resolveAgentEntry()), join(dist, PTY_RUNTIME_DIR))
