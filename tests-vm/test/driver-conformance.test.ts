// The driver conformance table (packages/runner/test/driver-conformance.ts) on the namespace
// driver inside the VM: a pure cgroup v2 kernel, the runner's own delegated `conch` subtree,
// and the guest's processes, cgroups, mounts and state dir checked for leftovers from inside.
import { describe, it } from 'vitest'
import { casesFor } from '../../packages/runner/test/driver-conformance.ts'
import { vmDriverTarget } from '../harness/vm-driver-target.ts'
import { guestInspector, vmSandboxOptions } from './vm-fixture.ts'

const target = vmDriverTarget('namespace', ['pids', 'memory'], {
  ...vmSandboxOptions(),
  inspector: guestInspector,
})

describe('namespace driver conformance on cgroup v2 in the VM', () => {
  for (const c of casesFor(target)) it(c.name, () => c.run(target), c.timeoutMs)
})
