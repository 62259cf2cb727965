// Builds the publishable router into dist/: `conch-router.js` (the bin: a Node version check
// that loads the CLI) and the router code with @conch/protocol bundled in (npm dependencies stay
// imports). Nothing in dist/ imports a workspace package. Run by `pnpm build` (turbo) and before
// `pnpm pack`.
//
//   node --conditions=source scripts/build.ts
import { readFileSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { build } from 'esbuild'

const root = join(import.meta.dirname, '..')
const dist = join(root, 'dist')
const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  dependencies: Record<string, string>
}

rmSync(dist, { recursive: true, force: true })
await build({
  entryPoints: { 'conch-router': join(root, 'src', 'bin.ts') },
  outdir: dist,
  bundle: true,
  // The bin must stay a file that an old Node can run up to its version check: the CLI goes
  // into a chunk that the check imports only once the version is right.
  splitting: true,
  chunkNames: 'router-[hash]',
  platform: 'node',
  format: 'esm',
  target: 'node22',
  conditions: ['source'],
  // npm dependencies are installed beside the package; @conch/protocol is a devDependency, so it
  // is bundled.
  external: Object.keys(manifest.dependencies),
  legalComments: 'none',
  logLevel: 'warning',
})
