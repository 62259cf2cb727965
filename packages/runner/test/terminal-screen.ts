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
