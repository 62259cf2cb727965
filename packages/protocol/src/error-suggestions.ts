import type { ErrorCode } from './error-codes.ts'

// What to do about each error code, in one short clause. It is applied at one layer only: the
// SDK's `ConchError` appends it to the message (docs/PROTOCOL.md, "Errors"). Runner, router and
// agent messages say what happened, with the ids involved, and leave the generic advice to this
// map. This file has no zod import, so the SDK bundles it without the schemas.

/** The suggestion for every code; a code without one fails typecheck. */
export const ERROR_SUGGESTIONS: Readonly<Record<ErrorCode, string>> = {
  BAD_REQUEST: 'fix the field the message names; the REST API reference lists every field',
  INVALID_FRAME: 'send frames as the WebSocket reference describes them',
  UNKNOWN_FRAME_TYPE: "check the frame type against the protocol version in the runner's hello",
  FRAME_TOO_LARGE: 'send large inputs as files (sb.files.write) instead of inlining them',
  COMMAND_TOO_LARGE: 'write the script to a file in the sandbox and run the file',
  INVALID_COMMAND: 'remove the NUL bytes; pass binary data as stdin or through a file',
  UNSUPPORTED_PROTOCOL_VERSION: 'upgrade the SDK or the runner so both speak the same protocol version',
  UNAUTHORIZED: 'check the API key, or mint a new token for this sandbox',
  FORBIDDEN: 'use the runner API key for runner-wide routes and a token of this sandbox for its routes',
  NOT_FOUND: 'check the path and the name against the API reference',
  SANDBOX_NOT_FOUND: 'list live sandboxes with Sandbox.list(), or create a new one',
  SESSION_NOT_FOUND: 'list live sessions with sb.listSessions(), or create the session',
  PROCESS_NOT_FOUND: 'list processes with sb.listProcesses() to see their ids',
  FILE_NOT_FOUND: 'check the path; list the directory with sb.files.list()',
  HISTORY_NOT_FOUND: 'read valid indexes from the session history first',
  SESSION_EXISTS: 'pick another session id, or attach to the existing session',
  SESSION_PROTECTED: 'create another session for separate state',
  SHELL_CLOSED: 'open a new shell to continue',
  SANDBOX_NOT_RUNNING: 'destroy the sandbox and create a new one',
  PATH_OUTSIDE_SANDBOX: 'use a path under /workspace whose symlinks stay under /workspace',
  NOT_A_DIRECTORY: 'check the path with sb.files.stat() first',
  IS_A_DIRECTORY: 'name a file, or list the directory with sb.files.list()',
  FILE_EXISTS: 'remove the target first, or choose another name',
  DIRECTORY_NOT_EMPTY: 'pass recursive: true to remove the directory with its contents',
  OUTPUT_LOST: 'run the command again to get its full output',
  LIMITS_NOT_ENFORCEABLE: 'leave the limit out, or have the operator give the runner what the message names',
  TOO_MANY_SANDBOXES: 'destroy sandboxes you no longer need',
  TOO_MANY_SESSIONS: 'delete sessions you no longer need',
  TOO_MANY_PROCESSES: 'kill background processes you no longer need',
  RATE_LIMITED: 'wait for queued work to finish, or close what you no longer use',
  DEADLINE_EXCEEDED: 'check that the runner is reachable and not overloaded, then retry',
  AGENT_UNAVAILABLE: 'retry shortly; if it persists, read the sandbox status and deadReason',
  RUNNER_UNAVAILABLE: 'retry shortly; the runner may be restarting',
  CONNECTION_LOST: 'check the network and the runner, then reattach the shell',
  INTERNAL: "retry once, then read the runner's log for the ids in the message",
}
