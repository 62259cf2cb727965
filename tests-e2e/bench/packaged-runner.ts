// The runner as it is shipped: `packages/runner/dist/conch.js` (the bin, which starts Node again
// with RUNNER_NODE_FLAGS and watches for idle time to give memory back) beside the agent bundle
// `conch-agent.mjs`, built fresh from this checkout. Memory figures of a long-running runner
// come from this path, since the image, systemd and npx all run it; the harness's default
// (`main.ts` from sources) has neither the flags nor the idle release.

import { spawnSync } from 'node:child_process'
import { join } from 'node:path'
import { REPO_ROOT, type RunnerOptions, type RunnerProcess, startRunner } from '../harness/runner-process.ts'

/** Builds the runner's dist/ from this checkout and starts its bin. */
export async function startPackagedRunner(options: RunnerOptions = {}): Promise<RunnerProcess> {
  const runnerDir = join(REPO_ROOT, 'packages/runner')
  const built = spawnSync(process.execPath, ['--conditions=source', 'scripts/build.ts'], {
    cwd: runnerDir,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  if (built.status !== 0) throw new Error(`building the runner failed: ${built.stderr || built.stdout}`)
  return startRunner({ ...options, entry: join(runnerDir, 'dist/conch.js') })
}
