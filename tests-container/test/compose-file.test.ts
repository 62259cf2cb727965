// deploy/compose/compose.yaml, validated by Compose itself (`docker compose config`, or
// Debian's `docker-compose` where the plugin is missing) and its normalised form checked: one
// runner, its port on loopback only, its state on a volume, its key from a secret file, and
// exactly the privileges the namespace driver needs (harness/container-privileges.ts). The
// tier's own daemon has no bridge network, so the service is validated here, not started.
import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { describe, expect, test } from 'vitest'
import { parse } from 'yaml'
import { z } from 'zod'

const COMPOSE_DIR = fileURLToPath(new URL('../../deploy/compose/', import.meta.url))

/** `config` through the Compose plugin when the CLI has it, else the standalone docker-compose. */
function composeConfig(env: Record<string, string> = {}): {
  code: number
  stdout: string
  stderr: string
  tool: string
} {
  const plugin = spawnSync('docker', ['compose', 'version'], { encoding: 'utf8' }).status === 0
  const [cmd, args] = plugin
    ? ['docker', ['compose', '-f', 'compose.yaml', 'config']]
    : ['docker-compose', ['-f', 'compose.yaml', 'config']]
  const r = spawnSync(cmd, args, { cwd: COMPOSE_DIR, encoding: 'utf8', env: { ...process.env, ...env } })
  if (r.error)
    throw new Error(
      `neither the docker compose plugin nor docker-compose runs: ${r.error.message}; apt-get install docker-compose`,
    )
  return {
    code: r.status ?? 1,
    stdout: r.stdout,
    stderr: r.stderr,
    tool: plugin ? 'docker compose' : 'docker-compose',
  }
}

/** A port in either the short (`127.0.0.1:7878:7878/tcp`) or the long form. */
const Port = z.union([
  z.string(),
  z.object({
    host_ip: z.string().optional(),
    published: z.union([z.string(), z.number()]),
    target: z.number(),
  }),
])

const Service = z.object({
  image: z.string(),
  ports: z.array(Port),
  environment: z.record(z.string(), z.string().nullable()),
  secrets: z.array(z.union([z.string(), z.object({ source: z.string() })])),
  volumes: z.array(
    z.union([z.string(), z.object({ type: z.string(), source: z.string(), target: z.string() })]),
  ),
  cap_add: z.array(z.string()),
  devices: z.array(z.union([z.string(), z.object({ source: z.string() })])),
  device_cgroup_rules: z.array(z.string()),
  security_opt: z.array(z.string()),
})

function hostIp(port: z.infer<typeof Port>): string {
  if (typeof port === 'string') return port.split(':').length === 3 ? (port.split(':')[0] ?? '') : ''
  return port.host_ip ?? ''
}

describe('compose file', () => {
  const r = composeConfig()
  test('is valid for Compose', () => {
    expect(r.stderr.replace(/.*(warn|version).*\n?/gi, '')).toBe('')
    expect(r.code).toBe(0)
  })

  test('runs one runner on loopback with its state on a volume and its key from a secret', () => {
    const config = parse(r.stdout) as {
      services: Record<string, unknown>
      secrets: Record<string, { file: string }>
    }
    expect(Object.keys(config.services)).toEqual(['runner'])
    const runner = Service.parse(config.services.runner)
    expect(runner.ports.length).toBe(1)
    expect(runner.ports.map(hostIp)).toEqual(['127.0.0.1'])
    const volumes = runner.volumes.map((v) => (typeof v === 'string' ? v : `${v.source}:${v.target}`))
    expect(volumes.some((v) => v.startsWith('conch-state:/var/lib/conch'))).toBe(true)
    expect(runner.environment.CONCH_API_KEY_FILE).toBe('/run/secrets/conch-api-key')
    expect(runner.environment.CONCH_API_KEY).toBeUndefined()
    expect(config.secrets['conch-api-key']?.file).toMatch(/conch-api-key$/)
  })

  test('grants exactly the namespace driver privileges and nothing broader', () => {
    const config = parse(r.stdout) as { services: { runner: unknown } }
    const runner = Service.parse(config.services.runner)
    expect([...runner.cap_add].sort()).toEqual(['SYS_ADMIN', 'SYS_PTRACE'])
    expect(runner.devices.map((d) => (typeof d === 'string' ? d.split(':')[0] : d.source))).toEqual([
      '/dev/loop-control',
    ])
    expect(runner.device_cgroup_rules).toEqual(['b 7:* rwm'])
    const opts = runner.security_opt.map((o) => o.replace(':', '='))
    expect(opts.some((o) => /^seccomp=.*seccomp-namespace\.json$/.test(o))).toBe(true)
    expect(opts).toContain('systempaths=unconfined')
    expect(opts).toContain('apparmor=unconfined')
    expect(JSON.stringify(config)).not.toMatch(/privileged|seccomp[=:]unconfined|network_mode|pid: host/)
  })

  test('publishes on another loopback port when CONCH_PORT is set', () => {
    const other = composeConfig({ CONCH_PORT: '17999' })
    expect(other.stdout).toContain('17999')
  })
})
