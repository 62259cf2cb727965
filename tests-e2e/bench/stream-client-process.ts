// The streaming phase's product client: a Node process of its own that connects to a sandbox
// through `@conch/sdk`, opens a shell (a session of its own, deleted at the end), and streams `head -c` through
// `shell.stream`. In its own process, the reader starts with Node's default heap like any
// user's script; in the bench's process it would stream with whatever heap the phases and the
// references before it left (measured: after a reference read a GiB into strings, V8 ran one
// full GC per young-generation fill through the next GiB the SDK read, 30-42 of them instead of
// 0-4, and the same stream ran at 0.5-0.7x its own speed in a fresh process).
//
// Protocol: argv[2] is JSON `{ url, apiKey, sandboxId, bytes, warmupBytes }`. It connects,
// streams `warmupBytes` once, prints `ready`; each `go` line on stdin streams `bytes` and prints
// `streamed <bytes received> <ms> <own CPU ms>`; stdin closing ends it.

import { createInterface } from 'node:readline'
import { Sandbox } from '@conch/sdk'

const { url, apiKey, sandboxId, bytes, warmupBytes } = JSON.parse(process.argv[2]!) as {
  url: string
  apiKey: string
  sandboxId: string
  bytes: number
  warmupBytes: number
}

const sb = await Sandbox.connect(sandboxId, { url, apiKey })
const sh = await sb.shell()

/** Streams `n` bytes of zeros and returns how many arrived; throws unless all did, with exit 0. */
async function streamZeros(n: number): Promise<number> {
  let received = 0
  let code = -1
  // A loaded machine may take longer than the session's 30 s default timeout for 1 GiB.
  for await (const event of sh.stream(`head -c ${n} /dev/zero`, { timeoutMs: 600_000 })) {
    if (event.type === 'exit') code = event.exitCode
    else received += event.data.length
  }
  if (code !== 0 || received !== n) throw new Error(`stream got ${received} of ${n} bytes, exit ${code}`)
  return received
}

const cpuMs = (): number => {
  const { user, system } = process.cpuUsage()
  return (user + system) / 1000
}

await streamZeros(warmupBytes)
process.stdout.write('ready\n')

let turn: Promise<void> = Promise.resolve()
const lines = createInterface({ input: process.stdin })
lines.on('line', (line) => {
  if (line !== 'go') return
  turn = turn.then(async () => {
    const cpu = cpuMs()
    const start = performance.now()
    const received = await streamZeros(bytes)
    const ms = performance.now() - start
    process.stdout.write(`streamed ${received} ${ms} ${cpuMs() - cpu}\n`)
  })
})
lines.on('close', () => {
  void turn.finally(async () => {
    sh.close()
    await sb.deleteSession(sh.sessionId)
    process.exit(0)
  })
})
process.on('unhandledRejection', (error) => {
  process.stderr.write(`stream client: ${error instanceof Error ? error.message : String(error)}\n`)
  process.exit(1)
})
