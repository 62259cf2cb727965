// The runner's state dir, checked before anything is written into it. Each missing folder on
// the way is made with one non-recursive mkdir (a recursive mkdir retries for ever under a
// folder such as /proc that says "no such file" to every create), and every failure becomes a
// StateDirError whose one-line message names the path, what is wrong and what to do.
import { mkdirSync, statSync, unlinkSync, writeFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'

/** A state dir the runner cannot use; the message is one line for the operator. */
export class StateDirError extends Error {
  /** Creates the error with the operator's message. */
  constructor(message: string, options: { cause?: unknown } = {}) {
    super(message, options)
    this.name = 'StateDirError'
  }
}

const ADVICE = 'pass a --state-dir on a writable local disk'

/** What an errno means for a folder we tried to create or write, in a few words. */
function reasonOf(error: unknown, path: string): string {
  const code = (error as NodeJS.ErrnoException).code
  switch (code) {
    case 'EACCES':
    case 'EPERM':
      return `permission denied writing ${path} (run the runner as a user who may write there)`
    case 'EROFS':
      return `${path} is on a read-only file system`
    case 'ENOENT':
      return `${path} does not accept new files (a virtual file system such as /proc or /sys)`
    case 'ENOTDIR':
      return `a part of ${path} is a file, not a folder`
    case 'ENOSPC':
    case 'EDQUOT':
      return `no space left for ${path}`
    case 'ENAMETOOLONG':
      return `the path ${path} is too long`
    default:
      return `${path}: ${(error as Error).message}`
  }
}

/** The nearest existing ancestor of `dir` (which must be a folder) and the folders below it to create, top first. */
function missingChain(dir: string): { existing: string; missing: string[] } {
  const missing: string[] = []
  let path = dir
  for (;;) {
    const stat = statSync(path, { throwIfNoEntry: false })
    if (stat) {
      if (!stat.isDirectory()) {
        throw new StateDirError(
          path === dir
            ? `the state dir ${dir} is a file, not a folder; ${ADVICE}`
            : `the state dir ${dir} is under ${path}, which is a file, not a folder; ${ADVICE}`,
        )
      }
      return { existing: path, missing }
    }
    missing.unshift(path)
    const parent = dirname(path)
    if (parent === path) return { existing: path, missing }
    path = parent
  }
}

/**
 * Creates the state dir (mode 0700) if it is missing and proves it is writable by creating and
 * removing a file in it. Throws StateDirError with a one-line message when it cannot be used.
 */
export function prepareStateDir(stateDir: string): void {
  const dir = resolve(stateDir)
  const { missing } = missingChain(dir)
  for (const path of missing) {
    try {
      mkdirSync(path, { mode: 0o700 })
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'EEXIST' && statSync(path).isDirectory()) continue
      throw new StateDirError(`cannot create the state dir ${dir}: ${reasonOf(error, path)}; ${ADVICE}`, {
        cause: error,
      })
    }
  }
  const probe = join(dir, `.write-check-${process.pid}`)
  try {
    writeFileSync(probe, '', { flag: 'wx', mode: 0o600 })
    unlinkSync(probe)
  } catch (error) {
    throw new StateDirError(`cannot write in the state dir ${dir}: ${reasonOf(error, dir)}; ${ADVICE}`, {
      cause: error,
    })
  }
}
