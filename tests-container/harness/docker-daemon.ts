// The tier's Docker daemon. By default the harness starts its own `dockerd` (Debian's docker.io)
// with no bridge and no iptables rules, its data root in the tier's cache folder (so images and
// build layers are reused between runs) and its exec root and socket in a temporary folder.
// Containers then run with `--network host` or `none` only. With CONCH_CONTAINER_DOCKER_HOST
// set, the tier uses that daemon instead (GitHub's runners have one) and starts nothing.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ContainerError } from './container-error.ts'
import { type DockerCli, dockerCli } from './docker-cli.ts'

/** A daemon the tier can use; disposing it stops a daemon the harness started. */
export interface DockerDaemon extends AsyncDisposable {
  /** The CLI bound to it. */
  readonly docker: DockerCli
  /** True when the harness started it (and so it has no bridge network). */
  readonly own: boolean
}

const READY_TIMEOUT_MS = 90_000

function onPath(name: string): boolean {
  return (
    spawnSync('sh', ['-c', `command -v ${name}`], {
      stdio: 'ignore',
      env: { ...process.env, PATH: `${process.env.PATH}:/usr/sbin:/sbin` },
    }).status === 0
  )
}

/** Unmounts what dockerd leaves mounted under `dir` (its `exec/netns/default`), deepest first. */
function unmountUnder(dir: string): void {
  const points = readFileSync('/proc/mounts', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[1] ?? '')
    .filter((point) => point.startsWith(`${dir}/`))
    .sort((a, b) => b.length - a.length)
  for (const point of points) spawnSync('umount', ['-l', point], { stdio: 'ignore' })
}

/** Starts a private dockerd (or binds to CONCH_CONTAINER_DOCKER_HOST) and waits until it answers. */
export async function startDockerDaemon(cacheDir: string): Promise<DockerDaemon> {
  const external = process.env.CONCH_CONTAINER_DOCKER_HOST
  if (!onPath('docker'))
    throw new ContainerError(
      'CONTAINER_TOOL_MISSING',
      'the docker CLI is not on PATH; install it with: apt-get install docker.io (scripts/bootstrap.mjs does under CI=true)',
    )
  if (external) {
    const docker = dockerCli(external)
    await docker.run(['version', '--format', '{{.Server.Version}}'])
    return { docker, own: false, async [Symbol.asyncDispose]() {} }
  }
  if (!onPath('dockerd'))
    throw new ContainerError(
      'CONTAINER_TOOL_MISSING',
      'dockerd is not installed; install it with: apt-get install docker.io (scripts/bootstrap.mjs does under CI=true)',
    )
  if (process.getuid?.() !== 0)
    throw new ContainerError(
      'CONTAINER_DAEMON_FAILED',
      'the container tier starts its own dockerd and needs root; run it as root or set CONCH_CONTAINER_DOCKER_HOST',
    )

  const dataRoot = join(cacheDir, 'docker')
  mkdirSync(dataRoot, { recursive: true })
  // A short path: the daemon's sockets live under the exec root, and socket paths are limited.
  const run = mkdtempSync(join(tmpdir(), 'conch-ct-'))
  const socket = join(run, 'docker.sock')
  const logFile = join(run, 'dockerd.log')
  const child: ChildProcess = spawn(
    'dockerd',
    [
      '--bridge=none',
      '--iptables=false',
      '--ip6tables=false',
      '--data-root',
      dataRoot,
      '--exec-root',
      join(run, 'exec'),
      '--pidfile',
      join(run, 'dockerd.pid'),
      '-H',
      `unix://${socket}`,
      // Its own containerd namespace, so a host's system containerd (if dockerd finds one) keeps
      // this daemon's containers apart from the host daemon's.
      '--containerd-namespace',
      'conch-tests',
      '--containerd-plugins-namespace',
      'conch-tests-plugins',
    ],
    {
      stdio: ['ignore', openSync(logFile, 'a'), openSync(logFile, 'a')],
      env: { ...process.env, PATH: `${process.env.PATH}:/usr/sbin:/sbin` },
    },
  )
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  const docker = dockerCli(`unix://${socket}`)
  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM')
      const timer = setTimeout(() => child.kill('SIGKILL'), 20_000)
      await exited
      clearTimeout(timer)
    }
    unmountUnder(run)
    rmSync(run, { recursive: true, force: true })
  }
  const deadline = Date.now() + READY_TIMEOUT_MS
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      const log = existsSync(logFile) ? readFileSync(logFile, 'utf8').slice(-4000) : ''
      await stop()
      throw new ContainerError('CONTAINER_DAEMON_FAILED', `dockerd exited before it answered:\n${log}`)
    }
    if (existsSync(socket) && (await docker.result(['version'])).code === 0) break
    if (Date.now() > deadline) {
      const log = readFileSync(logFile, 'utf8').slice(-4000)
      await stop()
      throw new ContainerError(
        'CONTAINER_DAEMON_FAILED',
        `dockerd did not answer within ${READY_TIMEOUT_MS} ms:\n${log}`,
      )
    }
    await new Promise((r) => setTimeout(r, 250))
  }
  return { docker, own: true, [Symbol.asyncDispose]: stop }
}
