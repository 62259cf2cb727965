#!/usr/bin/env node
// Builds the container tier's base image where no registry is reachable: a `debootstrap
// --variant=minbase` bookworm root filesystem from the Debian mirror apt uses, packed as a tar
// that `docker import` turns into an image much like `debian:bookworm-slim`. The tar is cached
// outside the repository in `<cache>/base/<key>/rootfs.tar`, where the key hashes this file, so
// editing the script rebuilds it and nothing else does. Prints the tar's path on stdout. Needs
// root and debootstrap. The mirror is CONCH_CONTAINER_MIRROR, else the first Debian URI in
// apt's sources, else deb.debian.org.
//
//   node tests-container/scripts/build-base-image.mjs [--cache <dir>]
import { spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

/** The Debian release of the base image, the one the Dockerfile's default base names. */
const SUITE = 'bookworm'

function log(message) {
  process.stderr.write(`[conch-container] ${message}\n`)
}

function run(cmd, args) {
  const result = spawnSync(cmd, args, { stdio: ['ignore', 'inherit', 'inherit'] })
  if (result.error) throw new Error(`${cmd}: ${result.error.message}`)
  if (result.status !== 0) throw new Error(`${cmd} ${args.join(' ')} exited with ${result.status}`)
}

/** The Debian mirror: CONCH_CONTAINER_MIRROR, else the first Debian (non-security) URI apt uses. */
export function debianMirror() {
  if (process.env.CONCH_CONTAINER_MIRROR) return process.env.CONCH_CONTAINER_MIRROR
  const files = ['/etc/apt/sources.list']
  if (existsSync('/etc/apt/sources.list.d')) {
    for (const f of readdirSync('/etc/apt/sources.list.d')) files.push(join('/etc/apt/sources.list.d', f))
  }
  for (const file of files) {
    if (!existsSync(file)) continue
    for (const match of readFileSync(file, 'utf8').matchAll(/(?:^URIs:|^deb)\s+(\S+)/gm)) {
      const uri = match[1]
      if (uri && /\/debian\/?$/.test(uri)) return uri
    }
  }
  return 'http://deb.debian.org/debian'
}

/** The default cache folder: CONCH_CONTAINER_CACHE, else $XDG_CACHE_HOME/conch-container, else /var/cache/conch-tests/container. */
export function defaultCacheDir() {
  if (process.env.CONCH_CONTAINER_CACHE) return process.env.CONCH_CONTAINER_CACHE
  if (process.env.XDG_CACHE_HOME) return join(process.env.XDG_CACHE_HOME, 'conch-container')
  return '/var/cache/conch-tests/container'
}

/** The cache key: a hash of this script, which holds everything that goes into the image. */
export function baseImageKey() {
  const self = readFileSync(fileURLToPath(import.meta.url))
  return createHash('sha256').update(self).digest('hex').slice(0, 16)
}

/** Builds the rootfs tar unless it is cached; returns its path. */
export function buildBaseImage(cacheDir = defaultCacheDir()) {
  const dir = join(cacheDir, 'base', baseImageKey())
  const tar = join(dir, 'rootfs.tar')
  if (existsSync(tar)) return tar
  if (process.getuid?.() !== 0) throw new Error('building the base image needs root (debootstrap)')
  mkdirSync(dir, { recursive: true })
  const work = mkdtempSync(join(dir, 'build-'))
  try {
    const rootfs = join(work, 'rootfs')
    const mirror = debianMirror()
    log(`debootstrap --variant=minbase ${SUITE} from ${mirror}`)
    run('debootstrap', ['--variant=minbase', SUITE, rootfs, mirror])
    // What debian:bookworm-slim also drops: downloaded package files and apt lists.
    rmSync(join(rootfs, 'var/cache/apt/archives'), { recursive: true, force: true })
    mkdirSync(join(rootfs, 'var/cache/apt/archives/partial'), { recursive: true })
    rmSync(join(rootfs, 'var/lib/apt/lists'), { recursive: true, force: true })
    mkdirSync(join(rootfs, 'var/lib/apt/lists/partial'), { recursive: true })
    run('tar', ['-C', rootfs, '--numeric-owner', '-cf', join(work, 'rootfs.tar'), '.'])
    renameSync(join(work, 'rootfs.tar'), tar)
    return tar
  } finally {
    rmSync(work, { recursive: true, force: true })
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const at = process.argv.indexOf('--cache')
  const cache = at > 0 ? process.argv[at + 1] : undefined
  process.stdout.write(`${buildBaseImage(cache)}\n`)
}
