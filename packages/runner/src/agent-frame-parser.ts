// The runner's parser of what an agent sends. The agent shares its sandbox with user code, so
// every frame is checked against the protocol's schemas before the runner acts on it. zod does
// that for every frame type; the few frames every run brings (`result`, `shell_start`,
// `shell_exit`, output, `credit`, heartbeats) first meet a hand-written check that accepts only
// frames zod accepts and builds the same object zod would (a fresh object with the schema's
// fields, unknown fields dropped). Anything it does not accept, it leaves to zod, which decides
// and words the error; so the answers, the errors and their codes are zod's in every case (a
// test feeds both the same hostile frames). On this machine zod took 3-4 us per frame inside
// a run's wake-up, a third of the runner's JS per run on the way back to the client.
import {
  AGENT_FRAME_TYPES,
  AgentFrame,
  type AgentShellErr,
  type AgentShellOut,
  type ParseResult,
  parseFrame,
} from '@conch/protocol'
import { isChannel, isCount, isRunId } from './quick-field-checks.ts'

/** Parses an untrusted agent → runner frame exactly as `parseFrame(AgentFrame, …)` does. Never throws. */
export function parseAgentFrame(header: unknown): ParseResult<AgentFrame> {
  const frame = quickFrame(header)
  if (frame !== undefined) return { ok: true, value: frame }
  return parseFrame(AgentFrame, header, 'type', AGENT_FRAME_TYPES)
}

/** `value` as zod would return it when it is one of the frames of every run and surely valid; else undefined. */
function quickFrame(value: unknown): AgentFrame | undefined {
  if (typeof value !== 'object' || value === null) return undefined
  const h = value as Record<string, unknown>
  switch (h.type) {
    case 'result':
      return isCount(h.id) && 'result' in h ? { type: 'result', id: h.id, result: h.result } : undefined
    case 'shell_start':
      return isChannel(h.ch) && isRunId(h.id) && isCount(h.offset)
        ? { type: 'shell_start', ch: h.ch, id: h.id, offset: h.offset }
        : undefined
    case 'shell_exit':
      return quickExit(h)
    case 'shell_out':
    case 'shell_err':
      return isChannel(h.ch) && (h.id === null || isRunId(h.id)) && isCount(h.offset)
        ? ({ type: h.type, ch: h.ch, id: h.id, offset: h.offset } as AgentShellOut | AgentShellErr)
        : undefined
    case 'data':
      return isChannel(h.ch) && isCount(h.offset) ? { type: 'data', ch: h.ch, offset: h.offset } : undefined
    case 'credit':
      return isChannel(h.ch) && isCount(h.bytes) && h.bytes > 0
        ? { type: 'credit', ch: h.ch, bytes: h.bytes }
        : undefined
    case 'ping':
    case 'pong':
      return Number.isSafeInteger(h.n) ? { type: h.type, n: h.n as number } : undefined
    default:
      return undefined
  }
}

function quickExit(h: Record<string, unknown>): AgentFrame | undefined {
  const { ch, id, code, timedOut, durationMs, offset, oomKilled } = h
  if (!isChannel(ch) || !isRunId(id) || !isCount(offset)) return undefined
  if (!Number.isSafeInteger(code) || (code as number) < 0 || (code as number) > 255) return undefined
  if (typeof timedOut !== 'boolean' || typeof durationMs !== 'number' || !(durationMs >= 0)) return undefined
  if (!Number.isFinite(durationMs)) return undefined
  const frame = { type: 'shell_exit' as const, ch, id, code: code as number, timedOut, durationMs, offset }
  if (oomKilled === undefined) return 'oomKilled' in h ? undefined : frame
  return typeof oomKilled === 'boolean' ? { ...frame, oomKilled } : undefined
}
