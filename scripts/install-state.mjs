// Whether `pnpm install` has anything to do. After a successful install the bootstrap records a
// hash of every file that decides what gets installed (the lockfile, the workspace file, .npmrc
// and each workspace package's package.json) under node_modules/. An install is current when
// that record matches the files as they are now and the node_modules folders pnpm made are
// still there; anything else (a changed lockfile, a new package, a deleted node_modules, an
// install that never finished) means install again. Plain Node (20 is enough), no dependencies:
// it runs before anything is installed.
import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'

/** Where the record of the last successful install lives, relative to the root. */
export const INSTALL_RECORD = join('node_modules', '.conch-install-state.json')

/** Files at the root that decide what gets installed, when present. */
const ROOT_INPUTS = ['package.json', 'pnpm-lock.yaml', 'pnpm-workspace.yaml', '.npmrc', '.pnpmfile.cjs']

/**
 * The workspace package folders (relative), from pnpm-workspace.yaml's `packages:` list; a
 * pattern ending in `/*` names every folder under it with a package.json.
 */
export function workspaceDirs(root) {
  const file = join(root, 'pnpm-workspace.yaml')
  if (!existsSync(file)) return []
  const dirs = []
  let inPackages = false
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (/^\S/.test(line)) inPackages = /^packages:\s*$/.test(line)
    const item = inPackages ? /^\s+-\s+["']?([^"'#\s]+)["']?/.exec(line) : null
    if (!item?.[1]) continue
    const pattern = item[1].replace(/\/+$/, '')
    if (pattern.endsWith('/*')) {
      const parent = pattern.slice(0, -2)
      if (!existsSync(join(root, parent))) continue
      for (const entry of readdirSync(join(root, parent), { withFileTypes: true }).sort((a, b) =>
        a.name.localeCompare(b.name),
      )) {
        if (entry.isDirectory() && existsSync(join(root, parent, entry.name, 'package.json')))
          dirs.push(`${parent}/${entry.name}`)
      }
    } else if (existsSync(join(root, pattern, 'package.json'))) {
      dirs.push(pattern)
    }
  }
  return dirs
}

/** Every file (relative) whose content decides what `pnpm install` does. */
export function installInputs(root) {
  const files = ROOT_INPUTS.filter((f) => existsSync(join(root, f)))
  for (const dir of workspaceDirs(root)) files.push(`${dir}/package.json`)
  return files
}

/** A hash of the install inputs' names and contents. */
export function installHash(root) {
  const hash = createHash('sha256')
  for (const file of installInputs(root)) {
    hash.update(`${file}\0`)
    hash.update(readFileSync(join(root, file)))
    hash.update('\0')
  }
  return hash.digest('hex')
}

/** The folders (relative) pnpm makes a node_modules in: the root and each package with dependencies. */
function dirsWithDependencies(root) {
  const dirs = ['.']
  for (const dir of workspaceDirs(root)) {
    const pkg = JSON.parse(readFileSync(join(root, dir, 'package.json'), 'utf8'))
    const deps = { ...pkg.dependencies, ...pkg.devDependencies, ...pkg.optionalDependencies }
    if (Object.keys(deps).length > 0) dirs.push(dir)
  }
  return dirs
}

/**
 * Whether the last successful install still matches the checkout: `{ current: true }`, or
 * `{ current: false, reason }` saying why an install is needed.
 */
export function installState(root) {
  if (!existsSync(join(root, 'node_modules', '.modules.yaml')))
    return { current: false, reason: 'node_modules is missing' }
  const recordFile = join(root, INSTALL_RECORD)
  if (!existsSync(recordFile)) return { current: false, reason: 'no record of a finished install' }
  let record
  try {
    record = JSON.parse(readFileSync(recordFile, 'utf8'))
  } catch {
    return { current: false, reason: 'the install record is unreadable' }
  }
  if (record?.hash !== installHash(root))
    return { current: false, reason: 'pnpm-lock.yaml or a package.json changed since the last install' }
  const missing = dirsWithDependencies(root).find((dir) => !existsSync(join(root, dir, 'node_modules')))
  if (missing !== undefined) return { current: false, reason: `${join(missing, 'node_modules')} is missing` }
  return { current: true }
}

/** Records a successful install of the checkout as it is now. */
export function recordInstall(root) {
  const file = join(root, INSTALL_RECORD)
  mkdirSync(dirname(file), { recursive: true })
  writeFileSync(file, `${JSON.stringify({ hash: installHash(root) })}\n`)
}
