/** Time as the agent sees it; injected so tests and benchmarks control it. */
export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number
  /** A monotonic time in milliseconds, for durations. */
  monotonicMs(): number
  /** Calls `fn` after `ms`; returns a handle for `clearTimer`. */
  setTimer(ms: number, fn: () => void): unknown
  /** Cancels a timer from `setTimer`. */
  clearTimer(handle: unknown): void
}

/** The real clock. */
export const systemClock: Clock = {
  now: () => Date.now(),
  monotonicMs: () => performance.now(),
  setTimer: (ms, fn) => {
    const t = setTimeout(fn, ms)
    t.unref?.()
    return t
  },
  clearTimer: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
}

/** Resolves after `ms` on `clock`. */
export function delay(clock: Clock, ms: number): Promise<void> {
  return new Promise((resolve) => clock.setTimer(ms, resolve))
}
