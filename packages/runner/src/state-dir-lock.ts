import { readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

/**
 * Claims a state dir for this process with a pid file, so two runners never share one (they
 * would take each other's agent connections in turns). A pid file whose process is gone (a
 * runner that was SIGKILLed) is taken over. Returns the release function.
 */
export function lockStateDir(stateDir: string, pid: number = process.pid): () => void {
  const path = join(stateDir, 'runner.pid')
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      writeFileSync(path, `${pid}\n`, { flag: 'wx', mode: 0o600 })
      return () => {
        if (readPid(path) === pid) rmSync(path, { force: true })
      }
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
      const owner = readPid(path)
      if (owner !== null && owner !== pid && isRunning(owner)) {
        throw new Error(
          `another runner (pid ${owner}) is using the state dir ${stateDir}; stop it or pass a different --state-dir`,
        )
      }
      rmSync(path, { force: true })
    }
  }
  throw new Error(`could not claim the state dir ${stateDir}`)
}

function readPid(path: string): number | null {
  try {
    const pid = Number.parseInt(readFileSync(path, 'utf8'), 10)
    return Number.isInteger(pid) && pid > 0 ? pid : null
  } catch {
    return null
  }
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM'
  }
}
