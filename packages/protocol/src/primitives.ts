import { z } from 'zod'
import { REFINEMENTS } from './refinements.ts'

/** A session id: letters, digits, `.`, `_` and `-`, starting with a letter or digit. */
export const SessionId = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, 'session ids are 1-64 of [A-Za-z0-9._-]')
/** A session id. */
export type SessionId = z.infer<typeof SessionId>

/** A sandbox id as the runner issues it (`sb_` plus random characters). */
export const SandboxId = z.string().regex(/^sb_[A-Za-z0-9]{8,40}$/, 'sandbox ids look like sb_xxxxxxxxxxxx')
/** A sandbox id. */
export type SandboxId = z.infer<typeof SandboxId>

/** A client-chosen run id, unique among the runs in flight on one shell. */
export const RunId = z.string().min(1).max(128)
/** A run id. */
export type RunId = z.infer<typeof RunId>

/** An environment variable name, as POSIX shells accept it. */
export const EnvName = z
  .string()
  .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'environment variable names are [A-Za-z_][A-Za-z0-9_]*')
/** The type `EnvName` parses to. */
export type EnvName = z.infer<typeof EnvName>

/** Environment variables to set; values may not contain NUL. */
export const Env = z.record(
  EnvName,
  z.string().refine(REFINEMENTS.envValueWithoutNul.test, REFINEMENTS.envValueWithoutNul.message),
)
/** Environment variables. */
export type Env = z.infer<typeof Env>

/** A timeout in milliseconds, before clamping. */
export const TimeoutMs = z.number().int().positive().max(2_147_483_647)
/** The type `TimeoutMs` parses to. */
export type TimeoutMs = z.infer<typeof TimeoutMs>

/** How byte data is carried in JSON: `utf8` decodes it (lossy for invalid UTF-8), `base64` keeps every byte. */
export const Encoding = z.enum(['utf8', 'base64'])
/** A data encoding. */
export type Encoding = z.infer<typeof Encoding>

/** Which output stream bytes came from. */
export const StreamName = z.enum(['stdout', 'stderr'])
/** An output stream name. */
export type StreamName = z.infer<typeof StreamName>

/** A byte offset into a session's or process's output log. */
export const Offset = z.number().int().nonnegative()
/** The type `Offset` parses to. */
export type Offset = z.infer<typeof Offset>

/** Milliseconds since the Unix epoch. */
export const Timestamp = z.number().int().nonnegative()
/** The type `Timestamp` parses to. */
export type Timestamp = z.infer<typeof Timestamp>
