// The output half of a shell socket: the agent channel's `shell_out`/`shell_err` events go to
// the client as JSON frames with decoded data, or as binary messages (see the protocol's
// output-frame.ts) once the client listed `binary_output`, each under the run id the client
// sees. Output credit goes back to the agent only while the socket's send buffer is small and,
// for a client that acknowledges output (`output_ack` in its hello), while less than its window
// of output is unacknowledged: a slow client slows the command, and the runner holds at most
// one agent channel window per socket.
import { encodeOutputHeader, LIMITS, type StreamName } from '@conch/protocol'
import { OutputDecoder } from './output-decoder.ts'
import type { ChannelOutput, RunnerChannel } from './runner-channel.ts'
import type { ShellFrameSender } from './shell-frame-sender.ts'

/** Send-buffer size above which the connection stops granting the agent credit. */
const HIGH_WATER_BYTES = 512 * 1024

/** Forwards one socket's output and paces the agent's credit by the client. */
export class ShellOutputRelay {
  readonly #sender: ShellFrameSender
  readonly #decoder: OutputDecoder
  readonly #lastRun: Record<StreamName, string | null> = { stdout: null, stderr: null }
  /** The id the client saw on the last output of each stream (for the decoder's flush). */
  readonly #lastRunShown: Record<StreamName, string | null> = { stdout: null, stderr: null }
  readonly #lastOffset: Record<StreamName, number> = { stdout: 0, stderr: 0 }
  /** The agent channel whose credit this relay grants; null until attached. */
  channel: RunnerChannel | null = null
  /** Credit received output earned and not yet granted. */
  #held = 0
  /** The client's window of unacknowledged output; 0 when it does not acknowledge. */
  #ackWindow = 0
  /** Log offset up to which the client has acknowledged output. */
  #acked = 0
  /** Log offset after the last output byte forwarded to the client. */
  sentEnd = 0
  /** Output goes as binary frames (the client asked for `binary_output`). */
  #binary = false

  /** A relay sending through `sender`, decoding text output as `encoding`. */
  constructor(sender: ShellFrameSender, encoding: 'utf8' | 'base64') {
    this.#sender = sender
    this.#decoder = new OutputDecoder(encoding)
  }

  /** How text output is encoded in JSON frames. */
  get encoding(): 'utf8' | 'base64' {
    return this.#decoder.encoding
  }

  /** True while credit is held back (sends then report their completion). */
  get holding(): boolean {
    return this.#held > 0
  }

  /** Forwards one output event of link run `event.id`, shown to the client as `shownId(run)`. */
  output(event: ChannelOutput, shownId: (run: string | null) => string | null): void {
    const { id: run, offset, payload } = event
    const stream = event.type === 'shell_out' ? 'stdout' : 'stderr'
    const n = payload.byteLength
    if (this.#lastRun[stream] !== run) {
      this.flush(stream)
      this.#lastRun[stream] = run
      this.#lastRunShown[stream] = shownId(run) ?? null
    }
    this.#lastOffset[stream] = offset + n
    if (offset + n > this.sentEnd) this.sentEnd = offset + n
    if (this.#binary) {
      this.#sender.sendBinary(
        encodeOutputHeader(stream, this.#lastRunShown[stream], offset),
        payload,
        event.lease,
      )
      this.#credit(n)
      return
    }
    // A text frame carries at most one data chunk, whatever the agent's frame held (see `#sendOutput`).
    for (let at = 0; at < n; at += LIMITS.maxDataChunkBytes) {
      const data = this.#decoder.decode(stream, payload.subarray(at, at + LIMITS.maxDataChunkBytes))
      if (data) this.#sendOutput(stream, this.#lastRunShown[stream], data, offset + at)
    }
    event.lease?.release()
    this.#credit(n)
  }

  /** Sends what the decoder still holds of `stream` (a partial character at a run's end). */
  flush(stream: StreamName): void {
    const rest = this.#decoder.flush(stream)
    if (!rest) return
    const type = stream === 'stdout' ? 'shell_out' : 'shell_err'
    this.#sender.send({ type, id: this.#lastRunShown[stream], data: rest, offset: this.#lastOffset[stream] })
  }

  /** Flushes both streams. */
  flushAll(): void {
    this.flush('stdout')
    this.flush('stderr')
  }

  /** The client acknowledges output up to `offset`; the latest ack counts, even a lower one. */
  ack(offset: number): void {
    if (this.#ackWindow === 0) return
    this.#acked = Math.min(offset, this.sentEnd)
    this.maybeRelease()
  }

  /** The client acknowledges output from now on, with a window of `windowBytes`. */
  expectAcks(windowBytes: number | undefined): void {
    if (this.#ackWindow !== 0) return
    this.#ackWindow = windowBytes ?? LIMITS.clientWindowBytes
    this.#acked = this.sentEnd
  }

  /** Output goes as binary messages from now on. */
  useBinary(): void {
    if (this.#binary) return
    this.flushAll()
    this.#binary = true
  }

  /** Grants the credit held back once the socket drained and the client has room. */
  maybeRelease(): void {
    if (this.#held > 0 && this.#canGrant()) {
      const n = this.#held
      this.#held = 0
      this.channel?.release(n)
      this.channel?.flushCredit()
    }
  }

  /**
   * Sends a `shell_out`/`shell_err` frame built by hand: base64 needs no escaping, and
   * JSON.stringify would scan and copy the whole data string. Each frame carries at most
   * `maxDataChunkBytes` of output, which keeps its string below V8's large-object size in
   * the runner and in the client, so it dies young instead of waiting for a full GC.
   */
  #sendOutput(stream: StreamName, run: string | null, data: string, offset: number): void {
    const type = stream === 'stdout' ? 'shell_out' : 'shell_err'
    const id = run === null ? 'null' : JSON.stringify(run)
    const text = this.#decoder.encoding === 'base64' ? `"${data}"` : JSON.stringify(data)
    this.#sender.sendData(`{"type":"${type}","id":${id},"data":${text},"offset":${offset}}`)
  }

  /**
   * Grants credit now while the socket drains and the client has room in its window;
   * otherwise holds it until a send completes or an ack arrives.
   */
  #credit(n: number): void {
    if (this.#held === 0 && this.#canGrant()) {
      this.channel?.release(n)
      return
    }
    this.#held += n
  }

  #canGrant(): boolean {
    if (this.#sender.bufferedAmount >= HIGH_WATER_BYTES) return false
    return this.#ackWindow === 0 || this.sentEnd - this.#acked < this.#ackWindow
  }
}
