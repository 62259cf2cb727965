// The server-side WebSocket class of the shell socket. When ws meets a frame it must not take
// (one over `maxPayload`, or one that breaks the WebSocket framing), it closes the socket itself
// with a bare status code (1009 or 1002). This class lets the connection answer first: ws calls
// `close(code)` with no reason only on that path (a peer's close is echoed with its reason, and
// the runner always gives one), so such a call asks `onBadFrame` for an error frame to send
// while the socket is still open and a typed reason to close with.
import { WebSocket } from 'ws'

/** A shell socket; ws builds it when passed as the server's `WebSocket` option. */
export class ShellWebSocket extends WebSocket {
  /** Answers a frame that ws refused with `closeCode`: sends an error frame, returns the close reason. */
  onBadFrame: ((closeCode: number) => string) | null = null

  /** Closes the socket; a bare code from ws's frame parser first goes through `onBadFrame`. */
  override close(code?: number, data?: string | Buffer): void {
    const answer = this.onBadFrame
    if (code !== undefined && data === undefined && answer !== null && this.readyState === WebSocket.OPEN) {
      this.onBadFrame = null
      super.close(code, answer(code))
      return
    }
    super.close(code, data)
  }
}
