// The runner's version, read from its own package.json. Both `src/` (a checkout) and `dist/`
// (the published package, where package.json always ships) sit one folder below it.
import { readFileSync } from 'node:fs'
import { z } from 'zod'

const PackageJson = z.object({ version: z.string().min(1) })

/** The runner's version (`version` in packages/runner/package.json), for `--version`, health checks and OpenAPI. */
export const RUNNER_VERSION: string = PackageJson.parse(
  JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')),
).version
