// Prepares the tier once: a Docker daemon (its own, or CONCH_CONTAINER_DOCKER_HOST), the base
// image, the runner image built with deploy/docker/build.mjs, and one runner container that
// serves every test file. Files reach it through `inject('container')`; the e2e files reach it
// through CONCH_E2E_URL and CONCH_E2E_API_KEY, which the fixture in tests-e2e reads
// (tests-e2e/harness/external-runner.ts). Timings of each step are printed for the docs.
import type { TestProject } from 'vitest/node'
import { defaultCacheDir } from '../scripts/build-base-image.mjs'
import { startDockerDaemon } from './docker-daemon.ts'
import { startRunnerContainer } from './runner-container.ts'
import { buildRunnerImage, ensureBaseImage } from './runner-image.ts'

/** What test files learn about the tier. */
export interface ContainerTier {
  /** The daemon's address, for the docker CLI. */
  dockerHost: string
  /** The runner image's tag. */
  image: string
  /** The shared runner container's name. */
  name: string
  /** Its state volume. */
  volume: string
  /** The runner's URL on loopback. */
  url: string
  /** The runner's API key. */
  apiKey: string
}

declare module 'vitest' {
  export interface ProvidedContext {
    /** The tier's daemon, image and shared runner container. */
    container: ContainerTier
  }
}

function log(message: string): void {
  process.stderr.write(`[container] ${message}\n`)
}

/** Starts the daemon, builds the images, starts the shared container; returns the teardown. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const started = Date.now()
  const lap = (what: string, since: number): number => {
    const now = Date.now()
    log(`${what} in ${((now - since) / 1000).toFixed(1)} s`)
    return now
  }
  let t = Date.now()
  const daemon = await startDockerDaemon(defaultCacheDir())
  t = lap(daemon.own ? 'own dockerd ready' : 'external docker daemon answered', t)
  try {
    const base = await ensureBaseImage(daemon.docker, defaultCacheDir())
    t = lap(`base image ${base} ready`, t)
    const image = await buildRunnerImage(daemon.docker, base)
    t = lap(`runner image ${image} built`, t)
    // The tier's own daemon keeps its data in the cache: drop the layers of earlier builds
    // that no tag names any more, so the cache does not grow with every run.
    if (daemon.own) await daemon.docker.run(['image', 'prune', '--force'])
    const shared = await startRunnerContainer(daemon.docker, { image, name: 'conch-tier' })
    lap('shared runner container healthy', t)
    log(`setup took ${((Date.now() - started) / 1000).toFixed(1)} s`)
    process.env.CONCH_E2E_URL = shared.url
    process.env.CONCH_E2E_API_KEY = shared.apiKey
    project.provide('container', {
      dockerHost: daemon.docker.host,
      image,
      name: shared.name,
      volume: shared.volume,
      url: shared.url,
      apiKey: shared.apiKey,
    })
    return async () => {
      await shared[Symbol.asyncDispose]()
      await daemon[Symbol.asyncDispose]()
    }
  } catch (error) {
    await daemon[Symbol.asyncDispose]()
    throw error
  }
}
