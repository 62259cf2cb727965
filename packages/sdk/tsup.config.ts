import { defineConfig } from 'tsup'

// One ESM file and one bundled .d.ts. The protocol is bundled in (users install one package);
// only its zod-free modules are reachable from the SDK (it validates with JSON Schema generated
// from the protocol's zod schemas), so zod is not in the output. `ws` stays
// an optional peer, imported at runtime only where no global WebSocket exists.
export default defineConfig({
  entry: ['src/index.ts'],
  format: ['esm'],
  platform: 'neutral',
  target: 'es2022',
  dts: true,
  clean: true,
  sourcemap: true,
  treeshake: true,
  external: ['ws'],
  noExternal: ['@conch/protocol'],
  esbuildOptions(options) {
    options.conditions = ['source', 'import']
  },
})
