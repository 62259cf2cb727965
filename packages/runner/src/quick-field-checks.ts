// Field checks the runner's quick frame parsers share (agent-frame-parser.ts,
// client-frame-parser.ts). Each accepts only what the protocol's schema accepts; the bounds come
// from the schemas themselves, so the two cannot drift apart.
import { ChannelId, RunId } from '@conch/protocol'

/** The largest channel number (`ChannelId`). */
const MAX_CHANNEL = ChannelId.maxValue ?? 0

/** The longest run id (`RunId`), in UTF-16 units as zod counts them. */
const MAX_RUN_ID = RunId.maxLength ?? 0

/** A non-negative safe integer (`Offset`, call ids). */
export function isCount(v: unknown): v is number {
  return Number.isSafeInteger(v) && (v as number) >= 0
}

/** A channel number (`ChannelId`). */
export function isChannel(v: unknown): v is number {
  return Number.isSafeInteger(v) && (v as number) >= 0 && (v as number) <= MAX_CHANNEL
}

/** A run id (`RunId`). */
export function isRunId(v: unknown): v is string {
  return typeof v === 'string' && v.length >= 1 && v.length <= MAX_RUN_ID
}
