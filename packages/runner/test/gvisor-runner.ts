// Test fixture: a runner app whose driver is the real gVisor driver (runsc, the real agent). It
// fails, never skips, when the host cannot run gVisor sandboxes: runsc comes from apt
// (`apt-get install runsc`), and the runner must be root.
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { GvisorDriver } from '../src/drivers/gvisor-driver.ts'
import { startRunner, type TestRunner, type TestRunnerOptions } from './runner-fixture.ts'

/**
 * Time a test of live snapshots or forks on gVisor may take: each checkpoint, restore and
 * sandbox start is a runsc process on the ptrace platform, seconds apiece on a busy host.
 */
export const GVISOR_LIVE_TIMEOUT_MS = 240_000

/** A runner on a temp state dir with the gVisor driver (on `rootfs` when given, else the host's /usr). */
export async function gvisorRunner(
  options: TestRunnerOptions & { rootfs?: string } = {},
): Promise<TestRunner> {
  const stateDir = options.stateDir ?? mkdtempSync(join(tmpdir(), 'conch-gv-'))
  const driver = new GvisorDriver({ stateDir, ...(options.rootfs ? { rootfs: options.rootfs } : {}) })
  const problem = driver.problem({ limits: { memoryBytes: 1, cpus: 1 } })
  if (problem) throw new Error(`this host cannot run gVisor sandboxes: ${problem}`)
  return startRunner({
    ...options,
    stateDir,
    driver,
    removeStateDir: options.removeStateDir ?? !options.stateDir,
  })
}
