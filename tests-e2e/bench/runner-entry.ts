// Which runner the benchmark starts, and its entry file: by default the built package through
// its bin, rebuilt first when a source is newer than the build.

import { spawnSync } from 'node:child_process'
import { existsSync, readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { REPO_ROOT } from '../harness/runner-process.ts'

/**
 * How the main runner starts. `dist` (the default): the built package (`pnpm build` of the
 * runner, run here first), through its bin with its node flags, malloc settings and idle
 * release, and with the agent bundle it ships: what users run, so the RSS rows of the goals
 * table describe it. `bin`: the bin from sources (Node strips the types, which costs memory the
 * package does not). `source`: `main.ts` from sources without the bin (the e2e harness's runner).
 */
export const RUNNER_MODE = process.env.BENCH_RUNNER ?? 'dist'

/** The main runner's entry file for `RUNNER_MODE`; builds the package for `dist`. */
export function runnerEntry(): string | undefined {
  if (RUNNER_MODE === 'source') return undefined
  if (RUNNER_MODE === 'bin') return join(REPO_ROOT, 'packages/runner/src/bin.ts')
  if (RUNNER_MODE !== 'dist')
    throw new Error(`BENCH_RUNNER must be dist, bin or source, got "${RUNNER_MODE}"`)
  const runnerDir = join(REPO_ROOT, 'packages/runner')
  const built = join(runnerDir, 'dist/conch.js')
  // Rebuilt only when a source is newer: every build's files are new to the namespace driver's
  // runtime image cache (keyed by the files' mtimes), which would make and mount one more image.
  const sources = ['runner', 'agent', 'link', 'protocol'].map((p) => join(REPO_ROOT, 'packages', p, 'src'))
  if (!existsSync(built) || Math.max(...sources.map(newestMtime)) > statSync(built).mtimeMs) {
    const build = spawnSync(process.execPath, ['--conditions=source', 'scripts/build.ts'], {
      cwd: runnerDir,
      encoding: 'utf8',
    })
    if (build.status !== 0) throw new Error(`building the runner failed: ${build.stderr}`)
  }
  return built
}

/** The newest modification time of any file under `dir`. */
function newestMtime(dir: string): number {
  let newest = 0
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) newest = Math.max(newest, statSync(join(entry.parentPath, entry.name)).mtimeMs)
  }
  return newest
}
