// Every driver on this host through the conformance table (driver-conformance.ts). A driver
// runs the limit cases it declares it enforces; the local driver enforces none.
import { describe, it } from 'vitest'
import { LocalDriver } from '../src/drivers/local-driver.ts'
import { casesFor } from './driver-conformance.ts'
import { hostTarget } from './host-driver-target.ts'

const TARGETS = [
  hostTarget('local', [], (stateDir) => new LocalDriver({ stateDir })),
  // Loaded when a namespace case starts, so the other drivers' cases run whatever state that module is in.
  hostTarget('namespace', ['pids', 'memory', 'cpu'], async (stateDir) => {
    const { NamespaceDriver } = await import('../src/drivers/namespace-driver.ts')
    return new NamespaceDriver({ stateDir })
  }),
  hostTarget('gvisor', ['pids', 'memory', 'cpu'], async (stateDir) => {
    const { GvisorDriver } = await import('../src/drivers/gvisor-driver.ts')
    const driver = new GvisorDriver({ stateDir })
    const problem = driver.problem({ limits: { memoryBytes: 1, cpus: 1 } })
    if (problem) throw new Error(`this host cannot run gVisor sandboxes: ${problem}`)
    return driver
  }),
]

describe.each(TARGETS)('$name driver conformance', (target) => {
  for (const c of casesFor(target)) it(c.name, () => c.run(target), c.timeoutMs)
})
