// Boots the tier's one VM before any test file runs and stops it after the last. Files reach it
// through `inject('vm')`. The serial console is written to test-results/vm-serial.log at the
// end, so a failure anywhere in the tier can be read against what the guest printed.
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { Sandbox } from '@conch/sdk'
import type { TestProject } from 'vitest/node'
import { bootVm, GUEST_COMPILE_CACHE, REPO_ROOT } from './vm.ts'

/** What test files learn about the VM. */
export interface VmConnection {
  /** The runner's URL on the host. */
  url: string
  /** The runner's API key. */
  apiKey: string
  /** `kvm` or `tcg`. */
  accelerator: string
  /** The guest's `booted` line: its cgroup filesystem type and controllers. */
  bootLine: string
  /** The run's guest inspector sandbox (see guest-inspector.ts). */
  inspectorId: string
}

declare module 'vitest' {
  export interface ProvidedContext {
    /** The VM booted for this run. */
    vm: VmConnection
  }
}

/** Where the serial console of the run is kept. */
const SERIAL_LOG = join(REPO_ROOT, 'test-results', 'vm-serial.log')

/** Boots the VM, provides it to the test files and returns the teardown. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  // The namespace driver is the default, on the guest's cgroup v2. The local driver is allowed
  // only for the guest inspector (guest-inspector.ts), which asks for it by name: it runs as
  // root in the guest and reads what the tests check (processes, cgroups, mounts, state dir).
  // No warm pool: its agents would start at boot and compete with the tests for the two
  // emulated CPUs, and this tier tests isolation, not create latency.
  const options = {
    runnerArgs: [
      '--warm-pool',
      '0',
      '--log-level',
      'warn',
      '--driver',
      'namespace',
      '--drivers',
      'namespace,local',
      '--unsafe-local',
    ],
  }
  // Node under QEMU's TCG emulation occasionally dies in V8 at start (a trap in emulated code,
  // seen once in several boots); one fresh boot is tried before the tier fails.
  const vm = await bootVm(options).catch((error: unknown) => {
    process.stderr.write(`[vm] first boot failed (${String(error).slice(0, 200)}); booting once more\n`)
    return bootVm(options)
  })
  process.stderr.write(`[vm] runner ready under ${vm.accelerator} in ${vm.bootMs} ms; ${vm.bootLine}\n`)
  const teardown = async (): Promise<void> => {
    mkdirSync(join(REPO_ROOT, 'test-results'), { recursive: true })
    writeFileSync(SERIAL_LOG, vm.serialLog())
    await vm.close()
  }
  try {
    // The guest inspector's sandbox (guest-inspector.ts): one for the run, so no file waits for
    // another agent to start.
    const inspector = await Sandbox.create({
      url: vm.url,
      apiKey: vm.apiKey,
      env: { NODE_COMPILE_CACHE: GUEST_COMPILE_CACHE },
      driver: 'local',
    })
    project.provide('vm', {
      url: vm.url,
      apiKey: vm.apiKey,
      accelerator: vm.accelerator,
      bootLine: vm.bootLine,
      inspectorId: inspector.id,
    })
  } catch (error) {
    await teardown()
    throw error
  }
  return teardown
}
