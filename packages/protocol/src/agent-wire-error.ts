import type { z } from 'zod'
import { boundedErrorDetails } from './bounded-error-details.ts'
import { type ErrorCode, WireError } from './error-codes.ts'

// An error as the agent reports it. The agent runs next to code the user does not trust, so its
// errors are bounded where the runner parses them: a code an agent never throws (UNAUTHORIZED,
// RUNNER_UNAVAILABLE, ...) becomes INTERNAL, the message is cut and made one line, and details
// that do not match the code's schema are dropped. What the runner forwards is then no more than
// the agent could honestly have said.

/** The most characters of an agent's error message; a longer one is cut. */
export const MAX_AGENT_ERROR_MESSAGE_CHARS = 2048

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it removes
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f-\u009f]/g

/** The codes an agent may report; any other code from an agent becomes INTERNAL. */
export const AGENT_ERROR_CODES: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  'BAD_REQUEST',
  'COMMAND_TOO_LARGE',
  'DIRECTORY_NOT_EMPTY',
  'FILE_EXISTS',
  'FILE_NOT_FOUND',
  'FORBIDDEN',
  'FRAME_TOO_LARGE',
  'HISTORY_NOT_FOUND',
  'INTERNAL',
  'INVALID_COMMAND',
  'INVALID_FRAME',
  'IS_A_DIRECTORY',
  'NOT_A_DIRECTORY',
  'NOT_FOUND',
  'OUTPUT_LOST',
  'PATH_OUTSIDE_SANDBOX',
  'PORT_NOT_LISTENING',
  'PROCESS_NOT_FOUND',
  'RATE_LIMITED',
  'SESSION_EXISTS',
  'SESSION_BUSY',
  'SESSION_NOT_FOUND',
  'SESSION_PROTECTED',
  'SHELL_CLOSED',
  'TERMINAL_NOT_FOUND',
  'TOO_MANY_PROCESSES',
  'TOO_MANY_SESSIONS',
  'TOO_MANY_TERMINALS',
  'UNKNOWN_FRAME_TYPE',
])

/**
 * `error` bounded as an agent's error: an allowed code, a message of at most
 * `MAX_AGENT_ERROR_MESSAGE_CHARS` with control characters (newlines included) replaced by
 * spaces, and details valid for the code or none.
 */
export function boundedAgentError(error: WireError): WireError {
  const text = error.message.slice(0, MAX_AGENT_ERROR_MESSAGE_CHARS).replace(CONTROL_CHARACTERS, ' ')
  if (!AGENT_ERROR_CODES.has(error.code)) {
    return {
      code: 'INTERNAL',
      message: `the agent reported ${error.code}, a code an agent does not send: ${text}`,
    }
  }
  const details = boundedErrorDetails(error.code, error.details)
  return details === undefined
    ? { code: error.code, message: text }
    : { code: error.code, message: text, details }
}

/** An error in an agent frame (`fail`, a channel's `error`), bounded by `boundedAgentError` as it is parsed. */
export const AgentWireError = WireError.overwrite(boundedAgentError)
/** An agent's error, bounded. */
export type AgentWireError = z.infer<typeof AgentWireError>
