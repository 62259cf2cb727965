// Splits a byte stream into JSON values, one per line (NDJSON).

/** Yields each non-empty line of `body` parsed as JSON. */
export async function* ndjsonLines(body: ReadableStream<Uint8Array>): AsyncGenerator<unknown> {
  const reader = body.getReader()
  const decoder = new TextDecoder()
  let pending = ''
  try {
    while (true) {
      const { value, done } = await reader.read()
      pending += done ? decoder.decode() : decoder.decode(value, { stream: true })
      let nl = pending.indexOf('\n')
      while (nl >= 0) {
        const line = pending.slice(0, nl).trim()
        pending = pending.slice(nl + 1)
        if (line) yield JSON.parse(line)
        nl = pending.indexOf('\n')
      }
      if (done) break
    }
    if (pending.trim()) yield JSON.parse(pending)
  } finally {
    await reader.cancel().catch(() => {})
  }
}
