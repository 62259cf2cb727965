// The router from the image, run as the Helm chart runs it: a second container of the same
// image with the chart's router command (read from deploy/helm/conch/values.yaml), as a
// non-root user with no capabilities, a read-only root filesystem and no privilege escalation,
// in front of a runner container started with a shard name. Both share the host's loopback
// (`--network host`), as the tier's daemon has no bridge. A shell runs through it with the SDK.
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { Sandbox } from '@conch/sdk'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { parse } from 'yaml'
import { freePort, type RunnerContainer, startRunnerContainer } from '../harness/runner-container.ts'
import { docker, tier, waitReady } from './tier-fixture.ts'

const VALUES = fileURLToPath(new URL('../../deploy/helm/conch/values.yaml', import.meta.url))
/** The router's command in the chart: `[conch-router, router]`. */
const ROUTER_COMMAND = (parse(readFileSync(VALUES, 'utf8')) as { router: { command: string[] } }).router
  .command
/** The user the chart's router pod runs as (router-deployment.yaml's securityContext). */
const ROUTER_USER = '10001:10001'

let runner: RunnerContainer
let routerName: string
let routerUrl: string
let routerPort: number

/** The router container's log. */
async function routerLogs(): Promise<string> {
  const r = await docker().result(['logs', routerName])
  return `${r.stdout}${r.stderr}`
}

beforeAll(async () => {
  runner = await startRunnerContainer(docker(), {
    image: tier().image,
    name: 'conch-shard',
    env: { CONCH_SHARD: 'conch-0' },
  })
  routerPort = await freePort()
  routerUrl = `http://127.0.0.1:${routerPort}`
  routerName = `conch-router-${runner.name.split('-').pop()}`
  const [entrypoint, ...args] = ROUTER_COMMAND
  await docker().run([
    'run',
    '--detach',
    '--name',
    routerName,
    '--network',
    'host',
    '--user',
    ROUTER_USER,
    '--read-only',
    '--cap-drop',
    'ALL',
    '--security-opt',
    'no-new-privileges',
    '--entrypoint',
    entrypoint!,
    tier().image,
    ...args,
    '--host',
    '127.0.0.1',
    '--port',
    String(routerPort),
    '--poll-interval-ms',
    '500',
    '--log-level',
    'info',
    '--shards',
    `conch-0=${runner.url}`,
  ])
  try {
    await waitReady(routerUrl)
  } catch (error) {
    throw new Error(`${String(error)}\nrouter log:\n${await routerLogs()}`)
  }
})

afterAll(async () => {
  if (routerName) await docker().result(['rm', '--force', routerName])
  await runner?.[Symbol.asyncDispose]()
})

describe('the router in the image', () => {
  test('is on PATH as conch-router and prints its usage', async () => {
    const help = await docker().run(['run', '--rm', '--entrypoint', 'conch-router', tier().image, '--help'])
    expect(help).toMatch(/^usage: conch-router/)
    for (const flag of ['--shards', '--shard-pattern', '--shard-count']) expect(help).toContain(flag)
    // The chart's command with a flag the router does not know: one line that says what to do.
    const bad = await docker().result([
      'run',
      '--rm',
      '--entrypoint',
      ROUTER_COMMAND[0]!,
      tier().image,
      ...ROUTER_COMMAND.slice(1),
      '--shard',
      'conch-0',
    ])
    expect(bad.code).toBe(2)
    expect(bad.stderr).toMatch(/^conch-router: unknown flag --shard; run conch-router --help/)
    expect(bad.stderr).not.toMatch(/\n\s+at /)
  })

  test('runs a shell through the router in a sandbox that cannot reach the router or the runner', async () => {
    const client = { url: routerUrl, apiKey: runner.apiKey }
    await using sandbox = await Sandbox.create(client)
    // The id names the shard (`conch-0`, written `conchX0`) the router placed it on.
    expect(sandbox.id).toMatch(/^sb_conchX0Z/)
    const shell = await sandbox.shell()
    await shell.run('cd /tmp && export ROUTED=yes')
    expect((await shell.run('echo "$ROUTED $PWD"')).stdout).toBe('yes /tmp\n')
    // Code in the sandbox shares no network with the host: neither the router nor the runner
    // on the host's loopback answers it.
    const runnerPort = new URL(runner.url).port
    const connect = `for p in ${routerPort} ${runnerPort}; do (exec 3<>/dev/tcp/127.0.0.1/$p) 2>/dev/null && echo "reached $p"; done; echo done`
    expect((await shell.run(connect)).stdout).toBe('done\n')
    // The same probe outside the sandbox, in the runner's container, reaches both.
    expect(await runner.exec(`bash -c '${connect}'`)).toBe(
      `reached ${routerPort}\nreached ${runnerPort}\ndone\n`,
    )
    expect((await Sandbox.list(client)).map((s) => s.id)).toContain(sandbox.id)
    // The runner behind it holds the sandbox; the router forwarded and logged without the key.
    const direct = await Sandbox.list({ url: runner.url, apiKey: runner.apiKey })
    expect(direct.map((s) => s.id)).toContain(sandbox.id)
    const log = await routerLogs()
    expect(log).toContain('conch router listening on')
    expect(log).not.toContain(runner.apiKey)
  })
})
