// The image under test, built the way users build it: deploy/docker/build.mjs on
// deploy/docker/Dockerfile. The base image is CONCH_CONTAINER_BASE when set (GitHub's runners
// pull `debian:bookworm-slim`); otherwise no registry is reachable, so the base is the
// debootstrap root filesystem that scripts/build-base-image.mjs caches, imported into the
// daemon once under a tag that names its content key.
import { fileURLToPath } from 'node:url'
import { ContainerError } from './container-error.ts'
import type { DockerCli } from './docker-cli.ts'

const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url))
const BUILD_SCRIPT = fileURLToPath(new URL('../../deploy/docker/build.mjs', import.meta.url))
const BASE_SCRIPT = fileURLToPath(new URL('../scripts/build-base-image.mjs', import.meta.url))

/** The tag the tier builds. */
export const RUNNER_IMAGE = 'conch-runner:container-tier'

interface BaseImageScript {
  buildBaseImage(cacheDir?: string): string
  baseImageKey(): string
}

/** Makes sure the base image exists in the daemon; returns its name. */
export async function ensureBaseImage(docker: DockerCli, cacheDir: string): Promise<string> {
  const named = process.env.CONCH_CONTAINER_BASE
  if (named) {
    if ((await docker.result(['image', 'inspect', named])).code !== 0) await docker.run(['pull', named])
    return named
  }
  const script = (await import(BASE_SCRIPT)) as BaseImageScript
  const tag = `conch-test-base:${script.baseImageKey()}`
  if ((await docker.result(['image', 'inspect', tag])).code === 0) return tag
  let tar: string
  try {
    tar = script.buildBaseImage(cacheDir)
  } catch (error) {
    throw new ContainerError(
      'CONTAINER_BUILD_FAILED',
      `building the base image failed: ${String(error)}; it needs root and debootstrap (apt-get install debootstrap)`,
      { cause: error },
    )
  }
  await docker.run(['import', tar, tag])
  return tag
}

/** Builds the runner image on `base` with the project's build script; returns its tag. */
export async function buildRunnerImage(docker: DockerCli, base: string): Promise<string> {
  const { spawn } = await import('node:child_process')
  const log: string[] = []
  const code = await new Promise<number>((resolve, reject) => {
    const child = spawn(process.execPath, [BUILD_SCRIPT, '--base', base, '--tag', RUNNER_IMAGE], {
      cwd: REPO_ROOT,
      env: { ...process.env, DOCKER_HOST: docker.host, DOCKER_CLI_HINTS: 'false' },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    const keep = (c: Buffer): void => {
      log.push(c.toString('utf8'))
      if (log.length > 200) log.shift()
    }
    child.stdout.on('data', keep)
    child.stderr.on('data', keep)
    child.once('error', reject)
    child.once('close', (c) => resolve(c ?? 1))
  })
  if (code !== 0) {
    throw new ContainerError(
      'CONTAINER_BUILD_FAILED',
      `deploy/docker/build.mjs exited with ${code}:\n${log.join('').slice(-4000)}`,
    )
  }
  return RUNNER_IMAGE
}
