// Test fixture: a runner app whose driver is the real namespace driver (bubblewrap, cgroups,
// the real agent), plus a buffered exec through its API. It fails, never skips, when the host
// cannot run namespace sandboxes: `npm test` installs bubblewrap, and the runner must be root.
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { RunResult } from '@conch/protocol'
import { NamespaceDriver } from '../src/drivers/namespace-driver.ts'
import { startRunner, type TestRunner, type TestRunnerOptions } from './runner-fixture.ts'

/** A runner on a temp state dir with the namespace driver. */
export async function nsRunner(options: TestRunnerOptions = {}): Promise<TestRunner> {
  const stateDir = options.stateDir ?? mkdtempSync(join(tmpdir(), 'conch-ns-'))
  const driver = new NamespaceDriver({ stateDir })
  const problem = driver.problem({ limits: { memoryBytes: 1, cpus: 1 } })
  if (problem) throw new Error(`this host cannot run namespace sandboxes: ${problem}`)
  return startRunner({
    ...options,
    stateDir,
    driver,
    removeStateDir: options.removeStateDir ?? !options.stateDir,
  })
}

/** Runs `command` through `POST /exec` (in `sessionId` when given); throws on a non-200. */
export async function exec(
  runner: TestRunner,
  id: string,
  command: string,
  sessionId?: string,
): Promise<RunResult> {
  const res = await runner.app.inject({
    method: 'POST',
    url: `/v1/sandboxes/${id}/exec`,
    headers: runner.auth,
    payload: { command, ...(sessionId ? { sessionId } : {}) },
  })
  if (res.statusCode !== 200) throw new Error(`exec ${command}: ${res.statusCode} ${res.body}`)
  return RunResult.parse(res.json())
}
