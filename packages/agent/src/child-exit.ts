import { constants } from 'node:os'

/** The shell-style exit code of a child: its code, or 128+n when signal n ended it. */
export function exitCodeOf(code: number | null, signal: NodeJS.Signals | null): number {
  if (code !== null) return code
  const number = signal ? constants.signals[signal] : undefined
  return number === undefined ? 255 : 128 + number
}

/** Sends `signal` to a whole process group, ignoring a group that is already gone. */
export function signalGroup(pgid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(-pgid, signal)
    return true
  } catch {
    return false
  }
}
