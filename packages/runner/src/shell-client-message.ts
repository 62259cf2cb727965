// A client's WebSocket message as the text of a frame, or the error it earns. The server skips
// ws's UTF-8 check (which closes the socket) so that a bad text frame gets an error frame like
// any other bad frame; a client sends no binary messages, and each gets the error its header
// earns. Either way the socket stays open.
import { isUtf8 } from 'node:buffer'
import { decodeOutputFrame, type WireError } from '@conch/protocol'

/** A message's frame text, or the error frame to answer it with. */
export type ClientMessage =
  | { ok: true; text: string }
  | { ok: false; code: WireError['code']; message: string; details?: Record<string, unknown> }

/** Reads one message ws delivered (`data` as ws hands it); `maxBytes` bounds a binary one. */
export function readClientMessage(data: unknown, isBinary: boolean, maxBytes: number): ClientMessage {
  const bytes = Array.isArray(data)
    ? Buffer.concat(data as Buffer[])
    : data instanceof ArrayBuffer
      ? Buffer.from(data)
      : Buffer.isBuffer(data)
        ? data
        : Buffer.from(String(data), 'utf8')
  if (isBinary) return binaryMessage(bytes, maxBytes)
  if (!isUtf8(bytes)) {
    return {
      ok: false,
      code: 'INVALID_FRAME',
      message:
        'the text frame is not valid UTF-8; send JSON encoded as UTF-8 (binary stdin goes base64 with stdinEncoding)',
    }
  }
  return { ok: true, text: bytes.toString('utf8') }
}

/** The error a binary message from a client earns. */
function binaryMessage(bytes: Buffer, maxBytes: number): ClientMessage {
  if (bytes.byteLength > maxBytes) {
    return {
      ok: false,
      code: 'FRAME_TOO_LARGE',
      message: `frame exceeds the ${maxBytes}-byte limit`,
      details: { limit: maxBytes },
    }
  }
  const read = decodeOutputFrame(bytes)
  if (!read.ok) return { ok: false, code: read.code, message: read.message }
  return {
    ok: false,
    code: 'INVALID_FRAME',
    message: 'binary output frames go from the runner to the client only; send JSON text frames',
  }
}

/** A message that ws refused (close code 1009: far too large; else broken framing): the error it earns and the close reason. */
export function refusedMessage(
  closeCode: number,
  maxBytes: number,
): { code: 'FRAME_TOO_LARGE' | 'INVALID_FRAME'; message: string; details?: Record<string, unknown> } {
  if (closeCode === 1009) {
    return {
      code: 'FRAME_TOO_LARGE',
      message: `a frame far over the ${maxBytes}-byte limit closes the socket`,
      details: { limit: maxBytes },
    }
  }
  return {
    code: 'INVALID_FRAME',
    message: `the client broke WebSocket framing (close code ${closeCode}), so the socket closes; reconnect with a conforming client`,
  }
}
