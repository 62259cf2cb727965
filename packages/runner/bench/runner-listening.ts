// The address a runner child process prints once it listens, for the runner's benches.
import type { ChildProcess } from 'node:child_process'

/** Resolves with the URL `child` reports listening on; rejects with its output if it exits first. */
export function listeningUrl(child: ChildProcess, name: string): Promise<string> {
  let out = ''
  return new Promise<string>((resolve, reject) => {
    const on = (d: Buffer): void => {
      out += d
      const m = /listening on (http:\/\/[\d.:]+)/.exec(out)
      if (m) resolve(m[1]!)
    }
    child.stdout?.on('data', on)
    child.stderr?.on('data', on)
    child.once('exit', (code) => reject(new Error(`runner ${name} exited (${code}): ${out}`)))
  })
}
