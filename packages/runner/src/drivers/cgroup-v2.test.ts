// cgroup v2 against a fake cgroupfs in a temp dir: the test writes the files the kernel would
// have (cgroup.controllers, cgroup.procs, cgroup.events, memory.swap.max) and checks what the
// implementation writes and in which order. A real v2 kernel runs the same code in the VM tier.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { parseKeyed } from './cgroup-files.ts'
import { CgroupsV2, ioMaxLine, parseEventsPopulated } from './cgroup-v2.ts'
import type { SandboxCgroupSpec } from './cgroups.ts'
import { AGENT_PIDS_RESERVE } from './work-cgroup.ts'

const MiB = 1024 * 1024

/** A fake cgroup2 mount: the root offers cpu, io, memory and pids. */
function fakeMount(): { mount: string } & Disposable {
  const base = mkdtempSync(join(tmpdir(), 'conch-cg2-'))
  const mount = join(base, 'cgroup')
  kernelFiles(mount, { controllers: 'cpuset cpu io memory hugetlb pids rdma misc' })
  return { mount, [Symbol.dispose]: () => rmSync(base, { recursive: true, force: true }) }
}

/** Writes the files the kernel shows in a group. */
function kernelFiles(
  dir: string,
  files: { controllers?: string; procs?: string; extra?: Record<string, string> },
): void {
  mkdirSync(dir, { recursive: true })
  writeFileSync(join(dir, 'cgroup.controllers'), `${files.controllers ?? ''}\n`)
  writeFileSync(join(dir, 'cgroup.subtree_control'), '\n')
  writeFileSync(join(dir, 'cgroup.procs'), files.procs ?? '')
  for (const [name, text] of Object.entries(files.extra ?? {})) writeFileSync(join(dir, name), text)
}

const read = (path: string): string => readFileSync(path, 'utf8')

/** A sandbox spec with every limit. */
const SPEC: SandboxCgroupSpec = {
  id: 'sb_test',
  limits: { memoryBytes: 256 * MiB, cpus: 0.5, pids: 100, io: { device: '7:3', writeBps: 1_000_000 } },
  agentReserveBytes: 64 * MiB,
}

/** The kernel files of a sandbox group and its work leaf (made before `create`, as mkdir would). */
function sandboxKernelFiles(delegated: string, id: string): void {
  const events = { 'cgroup.events': 'populated 0\nfrozen 0\n', 'cgroup.kill': '', 'memory.swap.max': 'max\n' }
  kernelFiles(join(delegated, id), { controllers: 'cpu io memory pids', extra: events })
  kernelFiles(join(delegated, id, 'work'), { controllers: 'memory', extra: { 'memory.swap.max': 'max\n' } })
  kernelFiles(join(delegated, id, 'agent'), { controllers: 'memory' })
}

describe('CgroupsV2 in a delegated systemd group', () => {
  it('moves the runner into a leaf before enabling controllers (no internal processes)', () => {
    using fs = fakeMount()
    const delegated = join(fs.mount, 'system.slice', 'conch.service')
    kernelFiles(delegated, { controllers: 'cpu io memory pids', procs: '4242\n4243\n' })
    const writes: string[] = []
    const cgroups = new CgroupsV2({
      mount: fs.mount,
      delegated,
      createsSubtree: false,
      trace: (path, value) => writes.push(`${path.slice(fs.mount.length)} ${value}`),
    })
    cgroups.prepare()
    expect(writes).toEqual([
      '/system.slice/conch.service/runner/cgroup.procs 4242',
      '/system.slice/conch.service/runner/cgroup.procs 4243',
      '/system.slice/conch.service/cgroup.subtree_control +cpu +io +memory +pids',
    ])
    // The parent that systemd owns is never written.
    expect(read(join(fs.mount, 'cgroup.subtree_control'))).toBe('\n')
  })

  it('asks for Delegate=yes when the unit was not given a controller a limit needs', () => {
    using fs = fakeMount()
    const delegated = join(fs.mount, 'system.slice', 'conch.service')
    kernelFiles(delegated, { controllers: 'pids' })
    const cgroups = new CgroupsV2({ mount: fs.mount, delegated, createsSubtree: false })
    expect(cgroups.problem({ memoryBytes: 64 * MiB })).toMatch(
      /not given the memory controller.*Delegate=yes/,
    )
    expect(cgroups.problem({ pids: 64 })).toBeNull()
    expect(() => cgroups.create({ ...SPEC, limits: { cpus: 1 } })).toThrow(
      expect.objectContaining({
        code: 'AGENT_UNAVAILABLE',
        message: expect.stringMatching(/cpu controller/),
      }),
    )
  })
})

describe('CgroupsV2 in a conch subtree it creates', () => {
  it('enables controllers from the mount down, then writes limits before the leaves exist', () => {
    using fs = fakeMount()
    const delegated = join(fs.mount, 'conch')
    kernelFiles(delegated, { controllers: 'cpu io memory pids' })
    sandboxKernelFiles(delegated, SPEC.id)
    const writes: string[] = []
    const cgroups = new CgroupsV2({
      mount: fs.mount,
      delegated,
      createsSubtree: true,
      trace: (path, value) => writes.push(`${path.slice(fs.mount.length)} ${value}`),
    })
    const group = cgroups.create(SPEC)
    const sb = join(delegated, SPEC.id)
    expect(group).toEqual({
      version: 2,
      id: SPEC.id,
      dirs: [join(sb, 'work'), join(sb, 'agent'), sb],
      join: [join(sb, 'agent', 'cgroup.procs')],
      work: {
        dir: join(sb, 'work'),
        procs: join(sb, 'work', 'cgroup.procs'),
        oomEvents: join(sb, 'work', 'memory.events'),
      },
      agentReserveBytes: 64 * MiB,
    })
    expect(writes).toEqual([
      '/cgroup.subtree_control +cpu +io +memory +pids',
      '/conch/cgroup.subtree_control +cpu +io +memory +pids',
      // The agent's reserve of pids sits above the commands' own limit.
      `/conch/sb_test/pids.max ${100 + AGENT_PIDS_RESERVE}`,
      `/conch/sb_test/memory.max ${320 * MiB}`,
      '/conch/sb_test/memory.swap.max 0',
      '/conch/sb_test/io.max 7:3 rbps=max wbps=1000000 riops=max wiops=max',
      '/conch/sb_test/cgroup.subtree_control +cpu +memory +pids',
      '/conch/sb_test/work/pids.max 100',
      `/conch/sb_test/work/memory.max ${256 * MiB}`,
      '/conch/sb_test/work/memory.swap.max 0',
      // The commands' CPU: a busy command cannot starve the agent of its quota.
      '/conch/sb_test/work/cpu.max 50000 100000',
    ])
    // The agent's leaf gets no memory.oom.group: an OOM must never take the agent as a group.
    expect(writes.some((w) => w.includes('memory.oom.group'))).toBe(false)
    // Only the agent (root) moves children: an owner here would let sandbox code move the agent.
    expect(statSync(join(sb, 'work', 'cgroup.procs'))).toMatchObject({ uid: process.getuid?.() ?? 0 })
  })

  it('makes a work leaf with the pids limit below the sandbox group, which keeps the agent a reserve', () => {
    using fs = fakeMount()
    const delegated = join(fs.mount, 'conch')
    kernelFiles(delegated, { controllers: 'cpu io memory pids' })
    const writes: string[] = []
    const cgroups = new CgroupsV2({
      mount: fs.mount,
      delegated,
      createsSubtree: true,
      trace: (path, value) => writes.push(`${path.slice(fs.mount.length)} ${value}`),
    })
    const group = cgroups.create({ id: 'sb_plain', limits: {}, agentReserveBytes: 64 * MiB })
    expect(group.work?.procs).toBe(join(delegated, 'sb_plain', 'work', 'cgroup.procs'))
    expect(writes.slice(2)).toEqual([
      `/conch/sb_plain/pids.max ${1024 + AGENT_PIDS_RESERVE}`,
      '/conch/sb_plain/cgroup.subtree_control +memory +pids',
      '/conch/sb_plain/work/pids.max 1024',
    ])
    // New limits keep the reserve: work gets the commands' limit, the sandbox group the sum.
    writes.length = 0
    cgroups.limits(group, { pids: 40 })
    expect(writes).toEqual([
      `/conch/sb_plain/pids.max ${40 + AGENT_PIDS_RESERVE}`,
      '/conch/sb_plain/work/pids.max 40',
    ])
  })

  it("moves a container's processes out of its cgroup namespace root before enabling controllers there", () => {
    using fs = fakeMount()
    // A cgroup namespace root is a non-root group: the kernel shows it a cgroup.type file, and
    // refuses controllers for its children (EBUSY) while processes live in it.
    writeFileSync(join(fs.mount, 'cgroup.type'), 'domain\n')
    writeFileSync(join(fs.mount, 'cgroup.procs'), '1\n77\n')
    const delegated = join(fs.mount, 'conch')
    kernelFiles(delegated, { controllers: 'cpu io memory pids' })
    const writes: string[] = []
    const cgroups = new CgroupsV2({
      mount: fs.mount,
      delegated,
      createsSubtree: true,
      trace: (path, value) => writes.push(`${path.slice(fs.mount.length)} ${value}`),
    })
    cgroups.prepare()
    expect(writes).toEqual([
      '/runner/cgroup.procs 1',
      '/runner/cgroup.procs 77',
      '/cgroup.subtree_control +cpu +io +memory +pids',
      '/conch/cgroup.subtree_control +cpu +io +memory +pids',
    ])
  })

  it("makes a work leaf with the commands' cpu.max and memory events for a CPU limit alone", () => {
    using fs = fakeMount()
    const delegated = join(fs.mount, 'conch')
    kernelFiles(delegated, { controllers: 'cpu io memory pids' })
    const writes: string[] = []
    const cgroups = new CgroupsV2({
      mount: fs.mount,
      delegated,
      createsSubtree: true,
      trace: (path, value) => writes.push(`${path.slice(fs.mount.length)} ${value}`),
    })
    const group = cgroups.create({ id: 'sb_cpu', limits: { cpus: 0.2 }, agentReserveBytes: 64 * MiB })
    const sb = join(delegated, 'sb_cpu')
    expect(group.work).toEqual({
      dir: join(sb, 'work'),
      procs: join(sb, 'work', 'cgroup.procs'),
      oomEvents: join(sb, 'work', 'memory.events'),
    })
    expect(writes.slice(2)).toEqual([
      `/conch/sb_cpu/pids.max ${1024 + AGENT_PIDS_RESERVE}`,
      // memory too: the sandbox binds work's memory.events, which exists only with it.
      '/conch/sb_cpu/cgroup.subtree_control +cpu +memory +pids',
      '/conch/sb_cpu/work/pids.max 1024',
      '/conch/sb_cpu/work/cpu.max 20000 100000',
    ])
  })

  it('kills with one write to cgroup.kill and resolves when cgroup.events says the group emptied', async () => {
    using fs = fakeMount()
    const delegated = join(fs.mount, 'conch')
    kernelFiles(delegated, { controllers: 'cpu io memory pids' })
    sandboxKernelFiles(delegated, SPEC.id)
    const cgroups = new CgroupsV2({ mount: fs.mount, delegated, createsSubtree: true })
    const group = cgroups.create(SPEC)
    const sb = join(delegated, SPEC.id)
    writeFileSync(join(sb, 'cgroup.events'), 'populated 1\nfrozen 0\n')
    let settled = false
    const killed = cgroups.kill(group).then(() => {
      settled = true
    })
    expect(read(join(sb, 'cgroup.kill'))).toBe('1')
    await Promise.resolve()
    expect(settled).toBe(false)
    // The kernel rewrites cgroup.events once the last process has gone.
    writeFileSync(join(sb, 'cgroup.events'), 'populated 0\nfrozen 0\n')
    await killed
    expect(settled).toBe(true)
  })

  it('reports the survivors when the group does not empty', async () => {
    using fs = fakeMount()
    const delegated = join(fs.mount, 'conch')
    kernelFiles(delegated, { controllers: 'cpu io memory pids' })
    sandboxKernelFiles(delegated, SPEC.id)
    const cgroups = new CgroupsV2({ mount: fs.mount, delegated, createsSubtree: true, killTimeoutMs: 20 })
    const group = cgroups.create(SPEC)
    const sb = join(delegated, SPEC.id)
    writeFileSync(join(sb, 'cgroup.events'), 'populated 1\nfrozen 0\n')
    writeFileSync(join(sb, 'work', 'cgroup.procs'), '777\n')
    await expect(cgroups.kill(group)).rejects.toMatchObject({
      code: 'INTERNAL',
      message: expect.stringMatching(/still has processes after cgroup.kill: 777/),
    })
  })

  it('reads usage from memory.current/peak, cpu.stat, pids.current and memory.events', () => {
    using fs = fakeMount()
    const delegated = join(fs.mount, 'conch')
    kernelFiles(delegated, { controllers: 'cpu io memory pids' })
    sandboxKernelFiles(delegated, SPEC.id)
    const cgroups = new CgroupsV2({ mount: fs.mount, delegated, createsSubtree: true })
    const group = cgroups.create(SPEC)
    const sb = join(delegated, SPEC.id)
    writeFileSync(join(sb, 'memory.current'), '52428800\n')
    writeFileSync(join(sb, 'memory.peak'), '104857600\n')
    writeFileSync(
      join(sb, 'cpu.stat'),
      'usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\nnr_periods 10\nnr_throttled 2\nthrottled_usec 3000\n',
    )
    writeFileSync(join(sb, 'pids.current'), '7\n')
    writeFileSync(join(sb, 'memory.events'), 'low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 0\n')
    writeFileSync(
      join(sb, 'work', 'memory.events'),
      'low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 0\n',
    )
    // memory.events is hierarchical by default: the sandbox's count already holds work's kills.
    expect(cgroups.stats(group)).toEqual({
      memoryBytes: 50 * MiB,
      memoryPeakBytes: 100 * MiB,
      cpuSeconds: 2.5,
      pids: 7,
      oomKills: 2,
    })
    const local = new CgroupsV2({ mount: fs.mount, delegated, createsSubtree: true, localEvents: true })
    writeFileSync(join(sb, 'memory.events'), 'low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n')
    expect(local.stats(group)?.oomKills).toBe(2)
  })

  it('reports a null peak on kernels without memory.peak, and null stats once the group is gone', () => {
    using fs = fakeMount()
    const delegated = join(fs.mount, 'conch')
    kernelFiles(delegated, { controllers: 'cpu io memory pids' })
    const cgroups = new CgroupsV2({ mount: fs.mount, delegated, createsSubtree: true })
    const group = cgroups.create({ id: 'sb_old', limits: {}, agentReserveBytes: 0 })
    writeFileSync(join(delegated, 'sb_old', 'memory.current'), '4096\n')
    expect(cgroups.stats(group)).toMatchObject({ memoryBytes: 4096, memoryPeakBytes: null, oomKills: 0 })
    rmSync(join(delegated, 'sb_old'), { recursive: true })
    expect(cgroups.stats(group)).toBeNull()
  })
})

describe('cgroup v2 file formats', () => {
  it('parses memory.events, cpu.stat and memory.stat as flat keyed numbers', () => {
    expect(parseKeyed('low 0\nhigh 3\nmax 40\noom 1\noom_kill 1\noom_group_kill 0\n')).toMatchObject({
      max: 40,
      oom_kill: 1,
    })
    expect(parseKeyed('usage_usec 123\nuser_usec 100\nsystem_usec 23\n').usage_usec).toBe(123)
    const stat = parseKeyed(
      'anon 1048576\nfile 2097152\nkernel 65536\nshmem 0\npgfault 1234\nworkingset_refault_anon 0\n',
    )
    expect(stat).toMatchObject({ anon: 1048576, file: 2097152, pgfault: 1234 })
    // A line that is not `key number` (memory.numa_stat style) is left out.
    expect(parseKeyed('anon N0=4096 N1=0\n')).toEqual({})
  })

  it('reads populated from cgroup.events and writes io.max lines', () => {
    expect(parseEventsPopulated('populated 1\nfrozen 0\n')).toBe(true)
    expect(parseEventsPopulated('populated 0\nfrozen 1\n')).toBe(false)
    expect(ioMaxLine({ device: '259:0', readBps: 10, readIops: 5 })).toBe(
      '259:0 rbps=10 wbps=max riops=5 wiops=max',
    )
  })
})
