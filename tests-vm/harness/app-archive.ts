// The per-boot half of the VM's initramfs: the conch sources, the node_modules they load and
// the pinned Node, packed as a newc archive that the kernel unpacks over the base image. It
// holds `/conch/node`, `/conch/vm.env` (what /init reads) and `/conch/repo/...`, a copy of the
// parts of the repository the guest runs, laid out at the same relative paths with pnpm's
// relative symlinks kept, so Node resolves modules in the guest exactly as on the host.
//
// What goes in is the dependency closure of the named workspace packages: each package's own
// files (without its node_modules), then for every name in `dependencies`,
// `optionalDependencies` and `peerDependencies` the folder Node would find, recursively. A
// missing optional or peer dependency is left out, as Node would. The named packages' `workspace:`
// devDependencies go in too: run from source, a package loads the workspace packages its build
// bundles (the runner's protocol and agent).
import {
  existsSync,
  lstatSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  statSync,
} from 'node:fs'
import { dirname, isAbsolute, join, relative, resolve } from 'node:path'
import { NewcWriter } from './newc-archive.ts'

/** Where the repository's files appear inside the guest. */
export const GUEST_REPO = '/conch/repo'

/** Where the pinned Node binary appears inside the guest. */
export const GUEST_NODE = '/conch/node'

/** What to pack. */
export interface AppArchiveOptions {
  /** The repository root on the host. */
  repoRoot: string
  /** Repo-relative folders of the workspace packages to include with their dependencies. */
  packages: readonly string[]
  /** Package names resolved from the repository root and included with their dependencies. */
  rootDependencies?: readonly string[]
  /** Repo-relative files shipped as they are (scripts the guest runs), besides the closure. */
  files?: readonly string[]
  /** The Node binary to run in the guest. */
  nodeBinary: string
  /** Variables written to /conch/vm.env for /init. */
  env: Readonly<Record<string, string>>
  /** The archive file to write. */
  out: string
}

/** What was packed. */
export interface AppArchiveSummary {
  /** Regular files in the archive. */
  files: number
  /** Bytes of file data in the archive. */
  bytes: number
}

const DEPENDENCY_FIELDS = ['dependencies', 'optionalDependencies', 'peerDependencies'] as const

/** Folders never copied out of a package. */
const SKIPPED_DIRS = new Set(['node_modules', '.turbo', '.git'])

/** Quotes a value for a POSIX shell. */
function shellQuote(value: string): string {
  return `'${value.replaceAll("'", `'\\''`)}'`
}

function readManifest(dir: string): Record<string, unknown> {
  const parsed: unknown = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'))
  return typeof parsed === 'object' && parsed !== null ? (parsed as Record<string, unknown>) : {}
}

function dependencyNames(manifest: Record<string, unknown>): string[] {
  const names = new Set<string>()
  for (const field of DEPENDENCY_FIELDS) {
    const deps = manifest[field]
    if (typeof deps === 'object' && deps !== null) for (const name of Object.keys(deps)) names.add(name)
  }
  return [...names]
}

/** The devDependencies that are workspace packages (`workspace:` specifiers). */
function workspaceDevDependencies(manifest: Record<string, unknown>): string[] {
  const deps = manifest.devDependencies
  if (typeof deps !== 'object' || deps === null) return []
  return Object.entries(deps)
    .filter(([, spec]) => typeof spec === 'string' && spec.startsWith('workspace:'))
    .map(([name]) => name)
}

/** The path Node would find `name` at from `dir` (a symlink under pnpm), or null. */
function findDependency(dir: string, name: string, stop: string): string | null {
  for (let at = dir; ; at = dirname(at)) {
    const candidate = join(at, 'node_modules', name)
    if (existsSync(candidate)) return candidate
    if (at === stop || dirname(at) === at) return null
  }
}

/** Collects the repo-relative files, folders and symlinks of a dependency closure. */
class Closure {
  readonly files = new Set<string>()
  readonly dirs = new Set<string>()
  readonly symlinks = new Map<string, string>()
  readonly #root: string
  readonly #visited = new Set<string>()

  constructor(root: string) {
    this.#root = root
  }

  /** Adds a package folder (a real path inside the repo) and everything it depends on. */
  addPackage(realDir: string): void {
    if (this.#visited.has(realDir)) return
    this.#visited.add(realDir)
    this.#addTree(realDir)
    for (const name of dependencyNames(readManifest(realDir))) this.addDependency(realDir, name)
  }

  /** Adds the package `name` as Node finds it from `fromDir`, with the symlink that leads there. */
  addDependency(fromDir: string, name: string): void {
    const found = findDependency(fromDir, name, this.#root)
    if (!found) return
    if (lstatSync(found).isSymbolicLink()) this.#addSymlink(found)
    this.addPackage(realpathSync(found))
  }

  #addSymlink(path: string): void {
    const target = readlinkSync(path)
    const absolute = resolve(dirname(path), target)
    const rel = this.#relative(path)
    this.symlinks.set(rel, isAbsolute(target) ? relative(dirname(path), absolute) : target)
    this.addParents(rel)
  }

  #addTree(dir: string): void {
    this.addParents(`${this.#relative(dir)}/x`)
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name)
      if (entry.isDirectory()) {
        if (!SKIPPED_DIRS.has(entry.name)) this.#addTree(path)
      } else if (entry.isSymbolicLink()) {
        this.#addSymlink(path)
      } else if (entry.isFile()) {
        this.files.add(this.#relative(path))
      }
    }
  }

  /** Adds the folders above a repo-relative path. */
  addParents(rel: string): void {
    for (let dir = dirname(rel); dir !== '.' && !this.dirs.has(dir); dir = dirname(dir)) this.dirs.add(dir)
  }

  #relative(path: string): string {
    const rel = relative(this.#root, path)
    if (rel.startsWith('..') || isAbsolute(rel)) throw new Error(`${path} is outside the repository`)
    return rel
  }
}

/** Writes the app archive and says how much went in. */
export function writeAppArchive(options: AppArchiveOptions): AppArchiveSummary {
  const root = realpathSync(options.repoRoot)
  const closure = new Closure(root)
  for (const pkg of options.packages) {
    const dir = realpathSync(join(root, pkg))
    closure.addPackage(dir)
    for (const name of workspaceDevDependencies(readManifest(dir))) closure.addDependency(dir, name)
  }
  for (const name of options.rootDependencies ?? []) closure.addDependency(root, name)
  closure.files.add('package.json')
  for (const file of options.files ?? []) {
    closure.files.add(file)
    closure.addParents(file)
  }

  const writer = new NewcWriter(options.out)
  let bytes = 0
  const addFile = (name: string, host: string, mode: number): void => {
    const data = readFileSync(host)
    bytes += data.length
    writer.add({ kind: 'file', name, mode, data })
  }
  writer.add({ kind: 'dir', name: 'conch', mode: 0o755 })
  writer.add({ kind: 'dir', name: 'conch/repo', mode: 0o755 })
  for (const dir of [...closure.dirs].sort())
    writer.add({ kind: 'dir', name: `conch/repo/${dir}`, mode: 0o755 })
  for (const file of closure.files) {
    const host = join(root, file)
    addFile(`conch/repo/${file}`, host, statSync(host).mode & 0o777)
  }
  for (const [link, target] of closure.symlinks)
    writer.add({ kind: 'symlink', name: `conch/repo/${link}`, target })
  addFile('conch/node', options.nodeBinary, 0o755)
  const env = Object.entries(options.env)
    .map(([name, value]) => `${name}=${shellQuote(value)}\n`)
    .join('')
  writer.add({ kind: 'file', name: 'conch/vm.env', mode: 0o600, data: Buffer.from(env) })
  writer.close()
  return { files: closure.files.size + 2, bytes }
}
