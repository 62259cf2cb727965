// A bench process of its own (a reference or a client under test) driven over its stdio, one
// line at a time: it prints `ready` once it can take requests, and answers each request with a
// line that starts with a known word, in the order the requests were written.

import { type ChildProcess, spawn } from 'node:child_process'
import { createInterface } from 'node:readline'

/** A Node script run as a child, spoken to in lines. */
export class LineProtocolChild implements AsyncDisposable {
  readonly #child: ChildProcess
  /** Waiters for answers, by the answer's first word, each list in request order. */
  readonly #answers = new Map<string, Array<(fields: string[] | Error) => void>>()
  readonly #notices = new Map<string, (fields: string[]) => void>()
  /** Resolves once the child printed `ready`; rejects if it exits first. */
  readonly ready: Promise<void>

  /** Runs `script` with `nodeFlags` and `--conditions=source`, then `args`. */
  constructor(script: string, nodeFlags: readonly string[], args: readonly string[] = []) {
    this.#child = spawn(process.execPath, [...nodeFlags, '--conditions=source', script, ...args], {
      stdio: ['pipe', 'pipe', 'inherit'],
    })
    const lines = createInterface({ input: this.#child.stdout! })
    this.ready = new Promise((resolve, reject) => {
      this.#child.once('exit', (code, signal) => {
        const error = new Error(`${script} exited with ${code ?? signal}`)
        reject(error)
        for (const waiters of this.#answers.values()) for (const fail of waiters.splice(0)) fail(error)
      })
      lines.on('line', (line) => {
        if (line === 'ready') return resolve()
        const [word, ...fields] = line.split(' ')
        this.#notices.get(word!)?.(fields)
        this.#answers.get(word!)?.shift()?.(fields)
      })
    })
  }

  get pid(): number {
    return this.#child.pid ?? -1
  }

  /** Calls `listener` with the fields of every line that starts with `word`. */
  onNotice(word: string, listener: (fields: string[]) => void): void {
    this.#notices.set(word, listener)
  }

  /** Writes a line nobody waits on. */
  send(line: string): void {
    this.#child.stdin?.write(`${line}\n`)
  }

  /** Writes `line` and resolves with the fields of the next line that starts with `answer`. */
  request(line: string, answer: string): Promise<string[]> {
    return new Promise((resolve, reject) => {
      const waiters = this.#answers.get(answer) ?? []
      this.#answers.set(answer, waiters)
      waiters.push((fields) => (fields instanceof Error ? reject(fields) : resolve(fields)))
      this.send(line)
    })
  }

  async [Symbol.asyncDispose](): Promise<void> {
    if (this.#child.exitCode !== null || this.#child.signalCode !== null) return
    const exited = new Promise((resolve) => this.#child.once('exit', resolve))
    this.#child.stdin?.end()
    setTimeout(() => this.#child.kill('SIGKILL'), 5000).unref()
    await exited
  }
}
