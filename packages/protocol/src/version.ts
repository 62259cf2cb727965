import { z } from 'zod'

/**
 * Version of the client contract (WebSocket and REST); bumped only for a breaking change (fields
 * grow additively). The runner↔agent link has its own version, `LINK_VERSION`.
 */
export const PROTOCOL_VERSION = 1

/** Optional features a peer announces in `hello`; a peer only uses what both sides list. */
export const Capability = z.enum([
  'shell',
  'reattach',
  'interrupt',
  'stdin',
  'base64',
  'heartbeat',
  'pipelining',
  'credit',
  'output_ack',
  'binary_output',
  'stdin_pipe',
  'terminals',
  'start_in_exit',
])
/** One capability name. */
export type Capability = z.infer<typeof Capability>

/** Every capability this protocol version defines. */
export const CAPABILITIES: readonly Capability[] = Capability.options
