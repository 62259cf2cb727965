// Many sessions at once: spread over sandboxes (the agent caps sessions per sandbox) and made
// in batches (a burst of creates would measure the queue, not the sessions).

import { CONFIG } from './bench-config.ts'

/** Makes `count` things with `make`, at most `width` at a time. */
export async function inBatches<T>(
  count: number,
  width: number,
  make: (i: number) => Promise<T>,
): Promise<T[]> {
  const out: T[] = []
  for (let start = 0; start < count; start += width) {
    const batch = Array.from({ length: Math.min(width, count - start) }, (_, k) => make(start + k))
    out.push(...(await Promise.all(batch)))
  }
  return out
}

/** Splits `count` sessions over sandboxes of at most `CONFIG.sessionsPerSandbox` each. */
export function spread(count: number): number[] {
  const per = CONFIG.sessionsPerSandbox
  return Array.from({ length: Math.ceil(count / per) }, (_, i) => Math.min(per, count - i * per))
}
