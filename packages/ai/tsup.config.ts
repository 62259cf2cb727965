import { defineConfig } from 'tsup'

// ESM and bundled .d.ts for the two entries. @conch/sdk and zod are dependencies and `ai` an
// optional peer: none of them is bundled.
export default defineConfig({
  entry: ['src/index.ts', 'src/ai-sdk.ts'],
  format: ['esm'],
  platform: 'neutral',
  target: 'es2022',
  dts: true,
  clean: true,
  sourcemap: true,
  treeshake: true,
  external: ['@conch/sdk', 'ai', 'zod'],
  esbuildOptions(options) {
    options.conditions = ['source', 'import']
  },
})
