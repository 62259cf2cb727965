// One runner container of the tier: the image under test, run with host networking on a free
// loopback port (the tier's own daemon has no bridge), a named volume for its state, an API key
// from a file mounted read-only (CONCH_API_KEY_FILE, as a compose secret would be) and the
// namespace driver's privileges. `started` resolves once Docker reports the container healthy,
// which is the image's HEALTHCHECK passing. Disposing it removes the container and its volume.
import { randomBytes } from 'node:crypto'
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ContainerError } from './container-error.ts'
import { privilegeFlags } from './container-privileges.ts'
import type { DockerCli } from './docker-cli.ts'

/** Where the key file appears in the container. */
const KEY_IN_CONTAINER = '/run/secrets/conch-api-key'

/** How long the container may take to become healthy. */
const HEALTHY_TIMEOUT_MS = 120_000

/** What to run. */
export interface RunnerContainerOptions {
  /** Image tag. */
  image: string
  /** Name prefix; a random suffix is added. */
  name: string
  /** A privilege (by its name in container-privileges.ts) to leave out. */
  without?: string
  /** Wait for the healthcheck (default true). */
  waitHealthy?: boolean
  /** Use this state volume (another container's) instead of a new one. */
  volume?: string
  /** Extra environment for the runner (for example CONCH_SHARD). */
  env?: Record<string, string>
}

/** A started runner container. */
export interface RunnerContainer extends AsyncDisposable {
  /** Container name. */
  readonly name: string
  /** Volume holding its state dir. */
  readonly volume: string
  /** `http://127.0.0.1:<port>`. */
  readonly url: string
  /** The API key. */
  readonly apiKey: string
  /** Runs a command in the container as root; resolves with stdout. */
  exec(command: string): Promise<string>
  /** Docker's health status (`healthy`, `starting`, `unhealthy`). */
  health(): Promise<string>
  /** Waits until Docker reports the container healthy. */
  waitHealthy(): Promise<void>
  /** The container's log. */
  logs(): Promise<string>
}

/** A free TCP port on loopback. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      const port = typeof address === 'object' && address ? address.port : 0
      server.close(() => resolve(port))
    })
  })
}

/** Starts a runner container and (by default) waits until it is healthy. */
export async function startRunnerContainer(
  docker: DockerCli,
  options: RunnerContainerOptions,
): Promise<RunnerContainer> {
  const suffix = randomBytes(4).toString('hex')
  const name = `${options.name}-${suffix}`
  const volume = options.volume ?? `${name}-state`
  const apiKey = `conch_${randomBytes(24).toString('hex')}`
  const secrets = mkdtempSync(join(tmpdir(), 'conch-ct-key-'))
  const keyFile = join(secrets, 'conch-api-key')
  writeFileSync(keyFile, apiKey, { mode: 0o400 })
  chmodSync(secrets, 0o700)
  const port = await freePort()
  const url = `http://127.0.0.1:${port}`
  await docker.run([
    'run',
    '--detach',
    '--name',
    name,
    '--network',
    'host',
    '--volume',
    `${volume}:/var/lib/conch`,
    '--volume',
    `${keyFile}:${KEY_IN_CONTAINER}:ro`,
    '--env',
    `CONCH_API_KEY_FILE=${KEY_IN_CONTAINER}`,
    '--env',
    'CONCH_HOST=127.0.0.1',
    '--env',
    `CONCH_PORT=${port}`,
    '--env',
    'CONCH_LOG_LEVEL=warn',
    ...Object.entries(options.env ?? {}).flatMap(([k, v]) => ['--env', `${k}=${v}`]),
    // The image's own HEALTHCHECK command, polled more often than its default 10 s.
    '--health-interval',
    '2s',
    ...privilegeFlags(options.without),
    options.image,
  ])

  const exec = (command: string): Promise<string> => docker.run(['exec', name, 'sh', '-c', command])
  const health = async (): Promise<string> =>
    (await docker.run(['inspect', '--format', '{{.State.Health.Status}}', name])).trim()
  const logs = async (): Promise<string> => {
    const r = await docker.result(['logs', name])
    return `${r.stdout}${r.stderr}`
  }
  const waitHealthy = async (): Promise<void> => {
    const deadline = Date.now() + HEALTHY_TIMEOUT_MS
    for (;;) {
      const status = await health()
      if (status === 'healthy') return
      if (status === 'unhealthy' || Date.now() > deadline) {
        throw new ContainerError(
          'CONTAINER_START_FAILED',
          `container ${name} is ${status}:\n${(await logs()).slice(-4000)}`,
        )
      }
      await new Promise((r) => setTimeout(r, 500))
    }
  }
  const container: RunnerContainer = {
    name,
    volume,
    url,
    apiKey,
    exec,
    health,
    waitHealthy,
    logs,
    async [Symbol.asyncDispose]() {
      await docker.result(['rm', '--force', '--volumes', name])
      await docker.result(['volume', 'rm', '--force', volume])
      rmSync(secrets, { recursive: true, force: true })
    },
  }
  if (options.waitHealthy !== false) {
    try {
      await waitHealthy()
    } catch (error) {
      await container[Symbol.asyncDispose]()
      throw error
    }
  }
  return container
}
