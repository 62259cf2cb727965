// Turns an agent channel into an NDJSON body of ExecEvents (`stdout`, `stderr`, then one `exit`
// or `error`). Credit goes back to the agent only when the HTTP client pulls more (`read()`), so a
// slow client slows the command instead of growing the runner's memory.
import { Readable } from 'node:stream'
import { type Encoding, type ExecEvent, LIMITS } from '@conch/protocol'
import { OutputDecoder } from './output-decoder.ts'
import type { RunnerChannel } from './runner-channel.ts'

/** Options of an NDJSON stream. */
export interface NdjsonOptions {
  /** Encoding of `data`. */
  encoding: Encoding
  /** Only this run's output, ending at its `shell_exit` (session channels); absent for exec/process channels. */
  run?: string
  /** Called once with the terminal event (or null when the client went away first). */
  onDone?: (event: ExecEvent | null) => void
}

/** A readable NDJSON body fed by `channel`. */
export function channelToNdjson(channel: RunnerChannel, options: NdjsonOptions): Readable {
  const decoder = new OutputDecoder(options.encoding)
  let owed = 0
  let finished = false
  const lastOffset = { stdout: 0, stderr: 0 }
  const out = new Readable({
    read() {
      if (owed > 0) {
        channel.release(owed)
        owed = 0
      }
    },
    destroy(error, callback) {
      if (!finished) {
        finished = true
        options.onDone?.(null)
      }
      channel.close()
      callback(error)
    },
  })
  const push = (event: ExecEvent): boolean => out.push(`${JSON.stringify(event)}\n`)
  const finish = (event: ExecEvent): void => {
    for (const stream of ['stdout', 'stderr'] as const) {
      const rest = decoder.flush(stream)
      if (rest) push({ type: stream, data: rest, offset: lastOffset[stream] })
    }
    push(event)
    finished = true
    options.onDone?.(event)
    channel.close()
    out.push(null)
  }
  channel.consume((event) => {
    if (finished) return
    switch (event.type) {
      case 'shell_out':
      case 'shell_err': {
        const n = event.payload.byteLength
        if (options.run !== undefined && event.id !== options.run) {
          channel.release(n)
          return
        }
        const stream = event.type === 'shell_out' ? 'stdout' : 'stderr'
        // An event carries at most one data chunk, whatever the agent's frame held: a string
        // over 128 KiB would land in V8's large-object space, which only a full GC frees.
        let more = true
        for (let at = 0; at < n; at += LIMITS.maxDataChunkBytes) {
          lastOffset[stream] = event.offset + at
          const data = decoder.decode(stream, event.payload.subarray(at, at + LIMITS.maxDataChunkBytes))
          if (data) more = push({ type: stream, data, offset: event.offset + at }) && more
        }
        if (more) channel.release(n)
        else owed += n
        return
      }
      case 'shell_exit':
        if (options.run === undefined || event.id !== options.run) return
        finish({
          type: 'exit',
          exitCode: event.code,
          timedOut: event.timedOut,
          durationMs: event.durationMs,
          ...(event.oomKilled === true ? { oomKilled: true } : {}),
        })
        return
      case 'end':
        finish({
          type: 'exit',
          exitCode: event.exitCode ?? 0,
          timedOut: event.timedOut,
          durationMs: event.durationMs,
          ...(event.oomKilled === true ? { oomKilled: true } : {}),
        })
        return
      case 'shell_closed':
        finish({ type: 'error', code: 'SHELL_CLOSED', message: `the shell closed: ${event.reason}` })
        return
      case 'error':
        finish({ type: 'error', code: event.error.code, message: event.error.message })
        return
      case 'data':
      case 'shell_start':
      case 'scrollback_end':
        return
    }
  })
  return out
}
