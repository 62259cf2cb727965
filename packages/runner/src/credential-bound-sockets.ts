// Relayed WebSockets (and long relayed answers, such as server-sent events) that live only as
// long as the credential that opened them.
//
// A port's WebSocket is relayed as raw bytes once the sandbox server accepts it, so nothing
// checks the client again on its own: without this, a socket opened with a port token would
// outlive the token's expiry and `DELETE …/exposed-ports/:port` (which revokes the token), one
// opened on a public exposure would outlive the exposure, and either would keep its sandbox
// awake for as long as a stranger held it open. Each such socket is registered with a check of
// its credential; the check runs every second and at once when a port is unexposed, and a socket
// whose credential no longer holds is cut (the client sees the connection end: the relay is
// raw bytes, so the runner cannot add a close frame between the server's frames). Sockets
// opened with the API key are not registered: the key does not expire.

/** Seconds between checks. */
const CHECK_INTERVAL_MS = 1_000

/** Something that can be cut: the relayed stream, or a relayed response. */
interface Cuttable {
  destroy(): void
  once(event: 'close', listener: () => void): unknown
}

/** The relayed sockets of a runner whose credentials can end. */
export class CredentialBoundSockets {
  readonly #sockets = new Map<Cuttable, () => boolean>()
  #timer: NodeJS.Timeout | undefined

  /** Cuts `stream` once `stillValid()` returns false. */
  add(stream: Cuttable, stillValid: () => boolean): void {
    this.#sockets.set(stream, stillValid)
    stream.once('close', () => {
      this.#sockets.delete(stream)
      if (this.#sockets.size === 0) this.#stop()
    })
    if (!this.#timer) {
      this.#timer = setInterval(() => this.check(), CHECK_INTERVAL_MS)
      this.#timer.unref()
    }
  }

  /** Checks every socket now (after an unexpose). */
  check(): void {
    for (const [stream, stillValid] of this.#sockets)
      if (!stillValid()) {
        this.#sockets.delete(stream)
        stream.destroy()
      }
  }

  /** Stops checking (runner shutdown; the sockets close with the server). */
  close(): void {
    this.#stop()
  }

  #stop(): void {
    clearInterval(this.#timer)
    this.#timer = undefined
  }
}
