import { defineConfig } from 'tsup'

// ESM and bundled .d.ts for the three entries. @conch/sdk and zod are dependencies, `ai` and
// `@openai/agents` optional peers: none of them is bundled.
export default defineConfig({
  entry: ['src/index.ts', 'src/ai-sdk.ts', 'src/openai-agents.ts'],
  format: ['esm'],
  platform: 'neutral',
  target: 'es2022',
  dts: true,
  clean: true,
  sourcemap: true,
  treeshake: true,
  external: ['@conch/sdk', '@openai/agents', 'ai', 'zod'],
  esbuildOptions(options) {
    options.conditions = ['source', 'import']
  },
})
