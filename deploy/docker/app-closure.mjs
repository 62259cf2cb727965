// The runner's files for the image: the named workspace packages and every package they load,
// copied into a folder at the same repo-relative paths with pnpm's relative symlinks kept, so
// Node resolves modules in the image exactly as in the checkout (and strips types from the
// workspace sources, which stay outside node_modules by their real paths).
//
// The closure is each package's own files (without node_modules) and, for every name in
// `dependencies`, `optionalDependencies` and `peerDependencies`, the folder Node would find,
// recursively. A missing optional or peer dependency is left out, as Node would.
import {
  copyFileSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  symlinkSync,
} from 'node:fs'
import { dirname, isAbsolute, join, relative, resolve } from 'node:path'

const DEPENDENCY_FIELDS = ['dependencies', 'optionalDependencies', 'peerDependencies']

/** Folders never copied out of any package: installed modules and build caches. */
const SKIPPED_DIRS = new Set(['node_modules', '.turbo', '.git'])

/** Folders never copied out of a workspace package: its tests and benchmarks. */
const WORKSPACE_ONLY_DIRS = new Set(['test', 'bench'])

/** Files never copied out of a workspace package: colocated unit tests. */
const SKIPPED_FILE = /\.test\.ts$/

function dependencyNames(dir) {
  const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'))
  const names = new Set()
  for (const field of DEPENDENCY_FIELDS)
    for (const name of Object.keys(manifest[field] ?? {})) names.add(name)
  return [...names]
}

/** The path Node would find `name` at from `dir` (a symlink under pnpm), or null. */
function findDependency(dir, name, stop) {
  for (let at = dir; ; at = dirname(at)) {
    const candidate = join(at, 'node_modules', name)
    if (existsSync(candidate)) return candidate
    if (at === stop || dirname(at) === at) return null
  }
}

/**
 * Copies the closure of `packages` (repo-relative folders) from `repoRoot` into `out`; returns
 * how many files were copied.
 */
export function copyAppClosure(repoRoot, packages, out) {
  const root = realpathSync(repoRoot)
  const visited = new Set()
  let files = 0

  const rel = (path) => {
    const r = relative(root, path)
    if (r.startsWith('..') || isAbsolute(r)) throw new Error(`${path} is outside the repository`)
    return r
  }
  const copyLink = (path) => {
    const target = readlinkSync(path)
    const dest = join(out, rel(path))
    mkdirSync(dirname(dest), { recursive: true })
    const linkTarget = isAbsolute(target) ? relative(dirname(path), resolve(dirname(path), target)) : target
    if (!existsSync(dest) && !lstatSync(dirname(dest)).isSymbolicLink()) symlinkSync(linkTarget, dest)
  }
  const copyTree = (dir, workspace) => {
    mkdirSync(join(out, rel(dir)), { recursive: true })
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name)
      if (entry.isDirectory()) {
        if (!SKIPPED_DIRS.has(entry.name) && !(workspace && WORKSPACE_ONLY_DIRS.has(entry.name)))
          copyTree(path, workspace)
      } else if (entry.isSymbolicLink()) {
        copyLink(path)
      } else if (entry.isFile() && !(workspace && SKIPPED_FILE.test(entry.name))) {
        copyFileSync(path, join(out, rel(path)))
        files += 1
      }
    }
  }
  const addPackage = (realDir) => {
    if (visited.has(realDir)) return
    visited.add(realDir)
    copyTree(realDir, !rel(realDir).split('/').includes('node_modules'))
    for (const name of dependencyNames(realDir)) {
      const found = findDependency(realDir, name, root)
      if (!found) continue
      if (lstatSync(found).isSymbolicLink()) copyLink(found)
      addPackage(realpathSync(found))
    }
  }
  for (const pkg of packages) addPackage(realpathSync(join(root, pkg)))
  copyFileSync(join(root, 'package.json'), join(out, 'package.json'))
  return files + 1
}
