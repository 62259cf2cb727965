// Gives memory back once a long-lived process (the runner, an agent) has gone quiet after work.
// V8 keeps the old generation it grew under load (pages of garbage and headroom) until a
// memory-reducing collection, which it starts on its own only now and then; this watcher starts
// one when the event loop has been idle for a while after being busy. It reads only the event
// loop's utilization, so it needs no hook in the code that proxies or runs commands. It lives in
// the protocol package because both sides run it (a subpath import, so it adds nothing to what
// imports the package's index). docs/MEMORY.md has what it was measured to give back.
import { performance } from 'node:perf_hooks'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'

/** How the watcher decides. */
export interface IdleReleaseOptions {
  /** Milliseconds between looks at the event loop. */
  intervalMs: number
  /** Event-loop utilization (0..1) over one interval above which the process counts as busy. */
  busyUtilization: number
  /** Quiet intervals in a row, after a busy one, before memory is released. */
  quietIntervals: number
}

/** 5 s looks, busy above 2 % utilization, release after 15 s of quiet. */
export const IDLE_RELEASE_DEFAULTS: IdleReleaseOptions = {
  intervalMs: 5000,
  busyUtilization: 0.02,
  quietIntervals: 3,
}

/**
 * The decision alone: fed one utilization figure per interval, it says when to release. It
 * releases once per busy spell, so an idle process is not collected over and over.
 */
export class IdleReleaseClock {
  readonly #options: IdleReleaseOptions
  #busySinceRelease = false
  #quiet = 0

  constructor(options: IdleReleaseOptions = IDLE_RELEASE_DEFAULTS) {
    this.#options = options
  }

  /** Records one interval's utilization; true when memory should be released now. */
  tick(utilization: number): boolean {
    if (utilization > this.#options.busyUtilization) {
      this.#busySinceRelease = true
      this.#quiet = 0
      return false
    }
    if (!this.#busySinceRelease) return false
    this.#quiet += 1
    if (this.#quiet < this.#options.quietIntervals) return false
    this.#busySinceRelease = false
    this.#quiet = 0
    return true
  }
}

type GcFunction = (options?: { type?: string; execution?: string; flavor?: string }) => void

/**
 * V8's `gc` function without `--expose-gc` on the command line: the flag is set only while one
 * fresh context is made, so no other code (and no later vm context) sees a `gc` global.
 */
function gcFunction(): GcFunction {
  setFlagsFromString('--expose-gc')
  try {
    return runInNewContext('gc') as GcFunction
  } finally {
    setFlagsFromString('--no-expose-gc')
  }
}

/**
 * Releases memory now: V8's last-resort collection (several full collections that compact the
 * old generation, shrink the young one and return the freed pages to the system).
 */
export function releaseMemory(gc: GcFunction = gcFunction()): void {
  gc({ type: 'major', execution: 'sync', flavor: 'last-resort' })
}

/**
 * Watches the event loop and releases memory after a busy spell once it has been quiet for
 * `quietIntervals` intervals. The timer does not keep the process alive; the returned function
 * stops it.
 */
export function watchIdleMemory(options: IdleReleaseOptions = IDLE_RELEASE_DEFAULTS): () => void {
  const gc = gcFunction()
  const clock = new IdleReleaseClock(options)
  let last = performance.eventLoopUtilization()
  const timer = setInterval(() => {
    const now = performance.eventLoopUtilization()
    const { utilization } = performance.eventLoopUtilization(now, last)
    last = now
    if (!clock.tick(utilization)) return
    releaseMemory(gc)
    // The collection's own time is not work: it must not count as the next busy spell.
    last = performance.eventLoopUtilization()
  }, options.intervalMs)
  timer.unref()
  return () => clearInterval(timer)
}
