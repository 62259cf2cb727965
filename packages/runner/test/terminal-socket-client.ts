import { WebSocket } from 'ws'

// A terminal socket opened by hand (subprotocol and bearer as the SDK sends them), for tests that
// attack it or watch what the SDK hides: the JSON frames, the output messages, the send buffer.

/** Opens a raw terminal socket; resolves with it and the JSON frames it receives. */
export function rawSocket(url: string, secret: string) {
  const ws = new WebSocket(url, ['conch.terminal.v1', `bearer.${secret}`])
  const frames: Record<string, unknown>[] = []
  const binary: Buffer[] = []
  const waiters = new Set<() => void>()
  ws.on('message', (data, isBinary) => {
    if (isBinary) binary.push(data as Buffer)
    else frames.push(JSON.parse(String(data)) as Record<string, unknown>)
    for (const w of waiters) w()
  })
  const frame = (match: (f: Record<string, unknown>) => boolean) =>
    new Promise<Record<string, unknown>>((resolve) => {
      const check = () => {
        const hit = frames.find(match)
        if (!hit) return
        waiters.delete(check)
        resolve(hit)
      }
      waiters.add(check)
      check()
    })
  const refused = new Promise<number>((resolve) =>
    ws.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0)),
  )
  const closed = new Promise<number>((resolve) => ws.on('close', (code) => resolve(code)))
  ws.on('error', () => {})
  return { ws, frames, binary, frame, refused, closed }
}
