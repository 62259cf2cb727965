// A script, run by driver-stop-event-loop.test.ts in a Node process of its own: it stops a
// namespace sandbox at the moment its sandbox process has ended but Node has not reaped it yet,
// with nothing else holding the event loop, as in a runner used in process (an embedded
// runner, a bench driving `inject`) when the link's socket is already closed. The driver's stop
// waits for that exit; the stop completes only if the wait itself keeps the loop alive until
// Node reaps the process. Prints `stopped` when it completed; Node exiting before that means a
// delete or hibernation that never finished (its workspace and cgroups left behind).
//
//   node --conditions=source driver-stop-event-loop.ts
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { DEFAULT_SANDBOX_LIMITS, LIMITS } from '@conch/protocol'
import { mintLinkSecret } from '@conch/protocol/link-proof'
import { NamespaceDriver } from '../src/drivers/namespace-driver.ts'
import { childrenOf, procStat } from '../src/drivers/proc-stat.ts'
import type { DriverSandbox } from '../src/drivers/sandbox-driver.ts'

const stateDir = mkdtempSync(join(tmpdir(), 'conch-stop-loop-'))
const driver = new NamespaceDriver({ stateDir })
let sandbox: DriverSandbox | undefined
try {
  const problem = driver.problem({ limits: { memoryBytes: 1, cpus: 1 } })
  if (problem) throw new Error(`this host cannot run namespace sandboxes: ${problem}`)
  const spec = {
    id: `sb_${randomBytes(6).toString('hex')}`,
    env: {},
    limits: DEFAULT_SANDBOX_LIMITS,
    scrollbackBytes: LIMITS.scrollbackBytes,
    maxSessions: LIMITS.maxSessionsPerSandbox,
    linkSecret: mintLinkSecret(),
  }
  const pipes = (): number => process.getActiveResourcesInfo().filter((r) => r === 'PipeWrap').length
  // Our own stdout and stderr (pipes when a test runs this) count from their first use.
  process.stdout.write('')
  process.stderr.write('')
  const before = pipes()
  sandbox = await driver.startAgent(await driver.create(spec), spec)
  const pid = (sandbox.state as { pid: number }).pid
  // Once its agent answers, the sandbox has read what the runner piped it at start (arguments,
  // seccomp filter, link secret) and closed those pipes: then only the link would hold the loop,
  // and it is closed here, as a runner detaches it before it stops a sandbox.
  const link = await driver.connect(sandbox, 30_000)
  link.destroy()
  for (const end = Date.now() + 30_000; pipes() > before; ) {
    if (Date.now() > end)
      throw new Error(`pipes to the sandbox stayed open: ${process.getActiveResourcesInfo()}`)
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
  // The sandbox's pid 1 is bwrap's child (once bwrap made it); once it dies, bwrap exits.
  let children: number[] = []
  for (const end = Date.now() + 10_000; children.length === 0 && Date.now() < end; ) {
    await new Promise((resolve) => setTimeout(resolve, 10))
    children = childrenOf(pid)
  }
  for (const child of children) process.kill(child, 'SIGKILL')
  // Hold the event loop until bwrap is a zombie, so Node has not reaped it when stop looks.
  const until = Date.now() + 10_000
  while (procStat(pid)?.state !== 'Z') {
    if (Date.now() > until) throw new Error(`sandbox process ${pid} did not end`)
  }
  await driver.destroy(sandbox)
  process.stdout.write('stopped\n')
} catch (error) {
  process.stderr.write(`${String(error)}\n`)
  process.exitCode = 1
  if (sandbox) await driver.destroy(sandbox).catch(() => {})
} finally {
  rmSync(stateDir, { recursive: true, force: true })
}
