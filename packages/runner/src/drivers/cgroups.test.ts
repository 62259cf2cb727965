// Detection against fake /proc files and a fake cgroup tree in a temp dir.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { detectCgroups } from './cgroups.ts'

/** A temp dir with a mountinfo and /proc/self/cgroup of our making. */
function fakeHost(): { dir: string; mountinfo: string; procCgroup: string } & Disposable {
  const dir = mkdtempSync(join(tmpdir(), 'conch-cg-detect-'))
  return {
    dir,
    mountinfo: join(dir, 'mountinfo'),
    procCgroup: join(dir, 'cgroup'),
    [Symbol.dispose]: () => rmSync(dir, { recursive: true, force: true }),
  }
}

/** A mountinfo line for a cgroup filesystem. */
function mountLine(
  id: number,
  root: string,
  point: string,
  type: 'cgroup' | 'cgroup2',
  superOptions: string,
): string {
  return `${id} 22 0:${id} ${root} ${point} rw,nosuid,nodev,noexec,relatime shared:${id} - ${type} ${type} ${superOptions}`
}

describe('detectCgroups', () => {
  it('picks v2 with the runner group as the delegated root under systemd', () => {
    using host = fakeHost()
    const mount = join(host.dir, 'fs')
    mkdirSync(join(mount, 'system.slice', 'conch.service'), { recursive: true })
    writeFileSync(join(mount, 'cgroup.controllers'), 'cpuset cpu io memory hugetlb pids rdma misc\n')
    writeFileSync(
      host.mountinfo,
      `${mountLine(30, '/', mount, 'cgroup2', 'rw,nsdelegate,memory_recursiveprot')}\n`,
    )
    writeFileSync(host.procCgroup, '0::/system.slice/conch.service\n')
    expect(detectCgroups({ ...host, systemd: true, uid: 0 })).toEqual({
      version: 2,
      mount,
      runnerGroup: join(mount, 'system.slice', 'conch.service'),
      delegated: join(mount, 'system.slice', 'conch.service'),
      createsSubtree: false,
      localEvents: false,
    })
  })

  it('picks v2 with a conch subtree below the mount without systemd, and reads memory_localevents', () => {
    using host = fakeHost()
    const mount = join(host.dir, 'fs with space')
    mkdirSync(mount)
    writeFileSync(join(mount, 'cgroup.controllers'), 'cpu io memory pids\n')
    const escaped = mount.replaceAll(' ', '\\040')
    writeFileSync(host.mountinfo, `${mountLine(30, '/', escaped, 'cgroup2', 'rw,memory_localevents')}\n`)
    writeFileSync(host.procCgroup, '0::/\n')
    expect(detectCgroups({ ...host, systemd: false, uid: 0 })).toMatchObject({
      version: 2,
      runnerGroup: mount,
      delegated: join(mount, 'conch'),
      createsSubtree: true,
      localEvents: true,
    })
  })

  it('maps a cgroup path through a mount of a subtree (a container with its own cgroup view)', () => {
    using host = fakeHost()
    const mount = join(host.dir, 'fs')
    mkdirSync(join(mount, 'app'), { recursive: true })
    writeFileSync(join(mount, 'cgroup.controllers'), 'memory pids\n')
    writeFileSync(host.mountinfo, `${mountLine(30, '/kubepods/pod1', mount, 'cgroup2', 'rw')}\n`)
    writeFileSync(host.procCgroup, '0::/kubepods/pod1/app\n')
    expect(detectCgroups({ ...host, systemd: true, uid: 0 })).toMatchObject({
      version: 2,
      delegated: join(mount, 'app'),
    })
  })

  it('picks v1 on a hybrid host whose v2 mount has no controllers, with co-mounted cpu,cpuacct', () => {
    using host = fakeHost()
    const base = join(host.dir, 'fs')
    mkdirSync(join(base, 'unified'), { recursive: true })
    writeFileSync(join(base, 'unified', 'cgroup.controllers'), '\n')
    writeFileSync(
      host.mountinfo,
      [
        mountLine(31, '/', join(base, 'cpu,cpuacct'), 'cgroup', 'rw,cpu,cpuacct'),
        mountLine(34, '/', join(base, 'memory'), 'cgroup', 'rw,memory'),
        mountLine(38, '/', join(base, 'pids'), 'cgroup', 'rw,pids'),
        mountLine(39, '/', join(base, 'systemd'), 'cgroup', 'rw,xattr,name=systemd'),
        mountLine(40, '/', join(base, 'unified'), 'cgroup2', 'rw'),
      ].join('\n'),
    )
    writeFileSync(host.procCgroup, '4:memory:/\n0::/\n')
    expect(detectCgroups({ ...host, uid: 0 })).toEqual({
      version: 1,
      controllers: {
        cpu: join(base, 'cpu,cpuacct'),
        cpuacct: join(base, 'cpu,cpuacct'),
        memory: join(base, 'memory'),
        pids: join(base, 'pids'),
      },
    })
  })

  it('names what is missing when the v2 mount is empty and no v1 pids controller is mounted', () => {
    using host = fakeHost()
    const mount = join(host.dir, 'fs')
    mkdirSync(mount)
    writeFileSync(join(mount, 'cgroup.controllers'), '\n')
    writeFileSync(host.mountinfo, `${mountLine(40, '/', mount, 'cgroup2', 'rw')}\n`)
    writeFileSync(host.procCgroup, '0::/\n')
    const found = detectCgroups({ ...host, uid: 0 })
    expect(found.version).toBeNull()
    expect(found).toMatchObject({
      problem: expect.stringMatching(/offers no controllers.*needs memory and pids/),
    })
  })

  it('says how to get cgroups when none is mounted', () => {
    using host = fakeHost()
    writeFileSync(host.mountinfo, '22 1 0:21 / /proc rw - proc proc rw\n')
    writeFileSync(host.procCgroup, '')
    expect(detectCgroups({ ...host, uid: 0 })).toMatchObject({
      version: null,
      problem: expect.stringMatching(/no cgroup filesystem is mounted.*mount -t cgroup2/),
    })
  })

  it('tells an unprivileged runner to get delegation when its systemd group is not writable', () => {
    using host = fakeHost()
    const mount = join(host.dir, 'fs')
    mkdirSync(join(mount, 'user.slice'), { recursive: true })
    writeFileSync(join(mount, 'cgroup.controllers'), 'memory pids\n')
    writeFileSync(host.mountinfo, `${mountLine(30, '/', mount, 'cgroup2', 'rw')}\n`)
    writeFileSync(host.procCgroup, '0::/user.slice\n')
    const found = detectCgroups({ ...host, systemd: true, uid: 65534, writable: () => false })
    expect(found).toMatchObject({
      version: null,
      problem: expect.stringMatching(/user\.slice is not writable by uid 65534.*Delegate=yes/),
    })
  })
})
