// Maps sandbox paths to host paths, confined to the workspace root.
//
// Model: the files API names paths as the sandbox sees them: absolute under `/workspace`, or
// relative to it. A path is normalised lexically first (so `..` cannot climb above the root),
// then the deepest existing ancestor is resolved with realpath and must still lie inside the
// root's realpath (so a symlink cannot lead out). Paths that fail either check get
// PATH_OUTSIDE_SANDBOX and are never touched.
import { realpathSync } from 'node:fs'
import { posix, sep } from 'node:path'
import { WORKSPACE_PATH } from '@conch/protocol'
import { AgentError } from './agent-error.ts'

/** Confines sandbox paths to one workspace root on the host. */
export class WorkspacePaths {
  /** The workspace root as given. */
  readonly root: string
  readonly #realRoot: string

  /** `root` must exist. */
  constructor(root: string) {
    this.root = root
    this.#realRoot = realpathSync(root)
  }

  /** The host path for a sandbox path; throws PATH_OUTSIDE_SANDBOX when it would escape. */
  resolve(sandboxPath: string): string {
    const relative = this.#relative(sandboxPath)
    const host = relative === '' ? this.#realRoot : `${this.#realRoot}${sep}${relative}`
    this.#assertInside(host, sandboxPath)
    return host
  }

  /**
   * The host path of the entry itself, without following a symlink in its last component:
   * for stat, remove and rename, which act on a link rather than on its target.
   */
  resolveEntry(sandboxPath: string): string {
    const relative = this.#relative(sandboxPath)
    if (relative === '') return this.#realRoot
    const host = `${this.#realRoot}${sep}${relative}`
    this.#assertInside(host.slice(0, host.lastIndexOf(sep)), sandboxPath)
    return host
  }

  /** The sandbox path (`/workspace/...`) for a host path inside the root. */
  toSandboxPath(hostPath: string): string {
    if (hostPath === this.#realRoot) return WORKSPACE_PATH
    return `${WORKSPACE_PATH}/${hostPath.slice(this.#realRoot.length + 1)}`
  }

  /** Whether a host path is the workspace root itself. */
  isRoot(hostPath: string): boolean {
    return hostPath === this.#realRoot
  }

  #relative(sandboxPath: string): string {
    if (sandboxPath.includes('\0')) throw outside(sandboxPath)
    const absolute = sandboxPath.startsWith('/') ? sandboxPath : `${WORKSPACE_PATH}/${sandboxPath}`
    const normal = posix.normalize(absolute)
    if (normal === WORKSPACE_PATH || normal === `${WORKSPACE_PATH}/`) return ''
    if (!normal.startsWith(`${WORKSPACE_PATH}/`)) throw outside(sandboxPath)
    return normal.slice(WORKSPACE_PATH.length + 1).replace(/\/+$/, '')
  }

  #assertInside(host: string, sandboxPath: string): void {
    let probe = host
    for (;;) {
      let real: string
      try {
        real = realpathSync(probe)
      } catch {
        const parent = probe.slice(0, probe.lastIndexOf(sep))
        if (parent.length < this.#realRoot.length) throw outside(sandboxPath)
        probe = parent
        continue
      }
      if (real !== this.#realRoot && !real.startsWith(`${this.#realRoot}${sep}`)) throw outside(sandboxPath)
      return
    }
  }
}

function outside(sandboxPath: string): AgentError {
  return new AgentError(
    'PATH_OUTSIDE_SANDBOX',
    `path "${sandboxPath.slice(0, 200)}" is outside the sandbox workspace; use a path under ${WORKSPACE_PATH}`,
    { path: sandboxPath.slice(0, 200) },
  )
}
