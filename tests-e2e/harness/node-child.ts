// A Node script in a child process (an SDK client in another process), with its output
// collected line by line. Disposing it SIGKILLs the child if it is still running, so a failed
// or timed-out test leaves nothing behind.

import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process'
import { REPO_ROOT } from './runner-process.ts'

/** How the child ended. */
export interface ChildExit {
  code: number | null
  signal: NodeJS.Signals | null
}

/** A running Node script. */
export interface NodeChild extends AsyncDisposable {
  /** Resolves when the child exits. */
  readonly exited: Promise<ChildExit>
  /** Everything it wrote to stdout and stderr so far, interleaved. */
  output(): string
  /** The complete stdout lines so far. */
  stdoutLines(): string[]
  /** Resolves with the first stdout line (seen or future) that matches; rejects if the child exits first. */
  waitForLine(match: (line: string) => boolean): Promise<string>
}

/** Runs `node --conditions=source <script> ...args` from the repository root. */
export function spawnNode(script: string, args: readonly string[], env: Record<string, string>): NodeChild {
  const child: ChildProcessWithoutNullStreams = spawn(
    process.execPath,
    ['--conditions=source', script, ...args],
    { cwd: REPO_ROOT, env: { ...process.env, ...env }, stdio: ['pipe', 'pipe', 'pipe'] },
  )
  child.stdin.end()
  let output = ''
  let partial = ''
  const lines: string[] = []
  const waiters = new Set<{ match: (line: string) => boolean; resolve: (line: string) => void }>()
  child.stdout.on('data', (chunk: Buffer) => {
    const text = chunk.toString()
    output += text
    const parts = (partial + text).split('\n')
    partial = parts.pop() ?? ''
    for (const line of parts) {
      lines.push(line)
      for (const waiter of waiters) {
        if (waiter.match(line)) {
          waiters.delete(waiter)
          waiter.resolve(line)
        }
      }
    }
  })
  child.stderr.on('data', (chunk: Buffer) => {
    output += chunk.toString()
  })
  const exited = new Promise<ChildExit>((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }))
  })
  return {
    exited,
    output: () => output,
    stdoutLines: () => [...lines],
    waitForLine(match) {
      const seen = lines.find(match)
      if (seen !== undefined) return Promise.resolve(seen)
      return new Promise<string>((resolve, reject) => {
        waiters.add({ match, resolve })
        void exited.then(({ code, signal }) =>
          reject(new Error(`child exited (code ${code}, signal ${signal}) before the line:\n${output}`)),
        )
      })
    },
    async [Symbol.asyncDispose]() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
      await exited
    },
  }
}
