/** Anything that delivers a terminal's output bytes, as the SDK's `Terminal` does. */
export interface ScreenSource {
  onData(fn: (bytes: Uint8Array) => void): unknown
}

/** A terminal's screen as text so far, and a wait for a pattern to appear on it. */
export interface Screen {
  /** Everything the terminal printed so far, decoded as UTF-8. */
  text(): string
  /** Resolves with the whole text once `match` matches it (at once if it already does). */
  until(match: RegExp): Promise<string>
}

/** Collects a terminal's output from now on. */
export function screenOf(term: ScreenSource): Screen {
  let text = ''
  const waiters = new Set<() => void>()
  term.onData((bytes) => {
    text += Buffer.from(bytes).toString('utf8')
    for (const w of waiters) w()
  })
  return {
    text: () => text,
    until: (match: RegExp) =>
      new Promise<string>((resolve) => {
        const check = () => {
          if (!match.test(text)) return
          waiters.delete(check)
          resolve(text)
        }
        waiters.add(check)
        check()
      }),
  }
}

/** A terminal the resize checks drive: the SDK's `Terminal` or a test's stand-in. */
export interface ResizableTerminal extends ScreenSource {
  write(data: string): void
  resize(cols: number, rows: number): Promise<unknown>
}

/**
 * Resizes `term` (a bash at its prompt) to 100x30 while bash does what readline does at each
 * prompt: reads the size, then writes it back after the resize. Resolves with the size bash then
 * sees, as `rows x cols`. With echo off, bash's own lines are the only output in between, so the
 * agent sees the write-back before the test goes on.
 */
export async function sizeAfterWriteBack(term: ResizableTerminal): Promise<string> {
  const { until } = screenOf(term)
  term.write(
    'stty -echo; s=$(stty size); echo read-$((1)); read; stty rows ${s% *} cols ${s#* }; echo wrote-$((2)); read; echo size-$(stty size | tr " " x)\r',
  )
  await until(/read-1\r\n/)
  await term.resize(100, 30)
  term.write('\r')
  await until(/wrote-2\r\n/)
  term.write('\r')
  const screen = await until(/size-\d+x\d+\r\n/)
  return /size-(\d+x\d+)\r\n/.exec(screen)?.[1] ?? ''
}
