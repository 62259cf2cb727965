import type { CommandResult } from './command-result.ts'
import type { RunLedger } from './run-ledger.ts'

// A run started with `stdin: 'pipe'`: the run's promise, given `write` and `end`, which send
// `shell_stdin` frames through the shell's ledger (held there until the run starts).

/**
 * A run started with `stdin: 'pipe'`: its result, plus its stdin. Writes before the run has
 * started are held and sent when it starts.
 *
 * @example
 * ```ts
 * const run = sh.run("read -p 'name? ' n; echo hi $n", { stdin: 'pipe' })
 * run.write('bob\n')
 * console.log((await run).stdout) // "hi bob\n"
 * ```
 */
export type PipedRun<T extends string | Uint8Array> = Promise<CommandResult<T>> & {
  /** Sends input to the command. */
  write(data: string | Uint8Array): void
  /** Sends the last input (if any) and closes stdin: the command reads EOF. */
  end(data?: string | Uint8Array): void
}

/** Gives a piped run's promise its `write` and `end`. @internal */
export function withStdin<P extends Promise<unknown>>(
  promise: P,
  ledger: RunLedger,
  id: string,
): P & Pick<PipedRun<string>, 'write' | 'end'> {
  return Object.assign(promise, {
    write: (data: string | Uint8Array) => ledger.stdin(id, data, false),
    end: (data?: string | Uint8Array) => ledger.stdin(id, data, true),
  })
}
