// Why the sandboxes this runner process started have ended. Each chain's `sh` becomes bwrap, the
// sandbox's first process, so its exit status (once Node reaps it) says why the sandbox ended:
// kept by pid for liveness checks, and awaitable while it is still to come.
import type { ChildProcess } from 'node:child_process'
import { exitReason } from './sandbox-launch.ts'

/** The exit reasons of sandbox chains this runner process spawned, by pid. */
export class ChainExits {
  readonly #exits = new Map<number, string>()
  /** Exit reasons still to come from sandboxes this runner process started. */
  readonly #pending = new Map<number, Promise<string>>()

  /** Records `child`'s exit reason under `pid` when it exits. */
  track(pid: number, child: ChildProcess): void {
    this.#pending.set(
      pid,
      new Promise((resolve) =>
        child.once('exit', (code, signal) => {
          const reason = exitReason(code, signal)
          this.#exits.set(pid, reason)
          this.#pending.delete(pid)
          resolve(reason)
        }),
      ),
    )
  }

  /** Why `pid` ended, when it was a chain of this process and has been reaped. */
  reason(pid: number): string | undefined {
    return this.#exits.get(pid)
  }

  /** Resolves with why `pid` ended once it is reaped; undefined when it is not a live chain of this process. */
  pending(pid: number): Promise<string> | undefined {
    return this.#pending.get(pid)
  }
}
