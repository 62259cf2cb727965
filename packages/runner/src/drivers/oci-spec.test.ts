import { describe, expect, it } from 'vitest'
import { ociSpec } from './oci-spec.ts'

const layout = {
  rootfs: '/state/sb/rootfs',
  hostSystem: true,
  hostname: 'sandbox',
  workspace: '/state/sb/workspace',
  linkDir: '/state/sb/link',
  etcFiles: { passwd: '/state/sb/etc/passwd' },
  optDir: '/state/sb/opt',
  extraFiles: [{ host: '/cache/preload.so', guest: '/opt/conch/preload.so' }],
  runtime: {
    mounts: [{ host: '/cache/rt/node', guest: '/opt/conch/node' }],
    symlinks: [],
    node: '/opt/conch/node',
    entry: '/opt/conch/conch-agent.mjs',
  },
  memoryBytes: 512,
  userProcesses: 64,
  hostPids: 3072,
  cpus: 0.5,
  cgroupsPath: '/conch-gvisor/sb',
  env: { PATH: '/usr/bin' },
  args: ['/bin/sh'],
}

describe('ociSpec', () => {
  it('makes only the workspace and the link dir writable, on a read-only root', () => {
    const spec = ociSpec(layout)
    expect(spec.root).toEqual({ path: '/state/sb/rootfs', readonly: true })
    const writable = spec.mounts.filter((m) => m.type === 'bind' && m.options.includes('rw'))
    expect(writable.map((m) => [m.source, m.destination])).toEqual([
      ['/state/sb/workspace', '/workspace'],
      ['/state/sb/link', '/run/conch'],
    ])
    expect(spec.mounts.find((m) => m.destination === '/usr')?.options).toContain('ro')
  })

  it('runs the agent as root with a few capabilities, no_new_privs and its own network namespace', () => {
    const spec = ociSpec(layout)
    expect(spec.process.user).toEqual({ uid: 0, gid: 0 })
    expect(spec.process.noNewPrivileges).toBe(true)
    expect(spec.process.capabilities.bounding).not.toContain('CAP_SYS_ADMIN')
    expect(spec.linux.namespaces.map((n) => n.type)).toContain('network')
    expect(spec.process.env).toEqual(['PATH=/usr/bin'])
  })

  it('puts the limits in the cgroup resources and RLIMIT_NPROC', () => {
    const spec = ociSpec(layout)
    expect(spec.linux.resources).toEqual({
      memory: { limit: 512 },
      pids: { limit: 3072 },
      cpu: { quota: 50_000, period: 100_000 },
    })
    expect(spec.process.rlimits).toEqual([{ type: 'RLIMIT_NPROC', hard: 64, soft: 64 }])
  })
})
