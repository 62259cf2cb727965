import { AsyncQueue } from './async-queue.ts'
import type { OutputEncoding } from './command-result.ts'
import type { ConchError } from './conch-error.ts'
import type { RunLedger } from './run-ledger.ts'
import type { ShellConnection } from './shell-connection.ts'
import type { ShellEvent, ShellRunOptions } from './shell-run-options.ts'

// `sh.stream`: one run as an async iterator. Its output callbacks push each chunk onto a queue
// and return a promise that settles when the loop takes it, so the run's output flow holds
// the command back while the loop body is busy; the run's end is one `exit` event. Leaving the
// loop early (`break`, `return`, a throw) interrupts the run and waits for it to end.

/**
 * Starts `command` on the shell's ledger (rejected at once with `closed` when the shell has
 * ended) and returns the iterator over its events. @internal
 */
export function streamRun(
  ledger: RunLedger,
  conn: ShellConnection,
  closed: ConchError | null,
  command: string,
  options: Omit<ShellRunOptions<OutputEncoding>, 'onStdout' | 'onStderr'>,
): AsyncIterableIterator<ShellEvent<string | Uint8Array>> {
  const queue = new AsyncQueue<ShellEvent<string | Uint8Array>>()
  let finished = false
  const { id, promise } = ledger.start(
    command,
    {
      ...options,
      binary: options.encoding === 'binary',
      onStdout: (data) => new Promise<void>((taken) => queue.push({ type: 'stdout', data }, taken)),
      onStderr: (data) => new Promise<void>((taken) => queue.push({ type: 'stderr', data }, taken)),
    },
    false,
    closed,
  )
  promise.then(
    (r) => {
      finished = true
      queue.push({
        type: 'exit',
        exitCode: r.exitCode,
        timedOut: r.timedOut,
        oomKilled: r.oomKilled,
        durationMs: r.durationMs,
      })
      queue.end()
    },
    (err: unknown) => {
      finished = true
      queue.fail(err)
    },
  )
  const iterator: AsyncIterableIterator<ShellEvent<string | Uint8Array>> = {
    next: () => queue.next(),
    return: async () => {
      queue.end()
      queue.drain()
      if (!finished) {
        conn.send(JSON.stringify({ type: 'shell_interrupt', id }))
        await promise.catch(() => {})
      }
      return { value: undefined, done: true }
    },
    [Symbol.asyncIterator]: () => iterator,
  }
  return iterator
}
