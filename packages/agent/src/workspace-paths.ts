// Maps sandbox paths to the workspace root, lexically.
//
// Model: the files API names paths as the sandbox sees them: absolute under `/workspace`, or
// relative to it. A path is normalised lexically into components below the root (so `..` cannot
// climb above it); anything else gets PATH_OUTSIDE_SANDBOX. Symlinks are not looked at here:
// `WorkspaceWalker` resolves the components one opened directory at a time. `resolve` serves the
// shells' working directories, which are strings handed to a spawned process.
import { realpathSync } from 'node:fs'
import { posix, sep } from 'node:path'
import { WORKSPACE_PATH } from '@conch/protocol/zod-free'
import { AgentError } from './agent-error.ts'

/** Confines sandbox paths to one workspace root on the host. */
export class WorkspacePaths {
  /** The workspace root as given. */
  readonly root: string
  /** The workspace root with its symlinks resolved. */
  readonly realRoot: string

  /** `root` must exist. */
  constructor(root: string) {
    this.root = root
    this.realRoot = realpathSync(root)
  }

  /** The components of a sandbox path below the root (`[]` for the root itself); throws PATH_OUTSIDE_SANDBOX. */
  components(sandboxPath: string): string[] {
    const relative = this.#relative(sandboxPath)
    return relative === '' ? [] : relative.split('/')
  }

  /** The sandbox path (`/workspace/...`) of components below the root. */
  sandboxPath(components: readonly string[]): string {
    return components.length === 0 ? WORKSPACE_PATH : `${WORKSPACE_PATH}/${components.join('/')}`
  }

  /** The host path for a sandbox directory, checked with realpath; throws PATH_OUTSIDE_SANDBOX when it would escape. */
  resolve(sandboxPath: string): string {
    const relative = this.#relative(sandboxPath)
    const host = relative === '' ? this.realRoot : `${this.realRoot}${sep}${relative}`
    this.#assertInside(host, sandboxPath)
    return host
  }

  #relative(sandboxPath: string): string {
    if (sandboxPath.includes('\0')) throw outsideError(sandboxPath)
    const absolute = sandboxPath.startsWith('/') ? sandboxPath : `${WORKSPACE_PATH}/${sandboxPath}`
    const normal = posix.normalize(absolute)
    if (normal === WORKSPACE_PATH || normal === `${WORKSPACE_PATH}/`) return ''
    if (!normal.startsWith(`${WORKSPACE_PATH}/`)) throw outsideError(sandboxPath)
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
        if (parent.length < this.realRoot.length) throw outsideError(sandboxPath)
        probe = parent
        continue
      }
      if (real !== this.realRoot && !real.startsWith(`${this.realRoot}${sep}`))
        throw outsideError(sandboxPath)
      return
    }
  }
}

/** PATH_OUTSIDE_SANDBOX for `sandboxPath`; `how` says what leads out (a `..`, a symlink). */
export function outsideError(sandboxPath: string, how?: string): AgentError {
  const path = sandboxPath.slice(0, 200)
  const why =
    how === undefined ? 'is outside the sandbox workspace' : `leads out of the sandbox workspace (${how})`
  return new AgentError('PATH_OUTSIDE_SANDBOX', `path "${path}" ${why}`, { details: { path } })
}
