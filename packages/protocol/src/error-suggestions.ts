import type { ErrorCode } from './error-codes.ts'

// What to do about each error code, in one short clause. It is applied at one layer only: the
// SDK's `ConchError` appends it to the message (docs/PROTOCOL.md, "Errors"). Runner, router and
// agent messages say what happened, with the ids involved, and leave the generic advice to this
// map. This file has no zod import, so the SDK bundles it without the schemas.

/** The suggestion for every code; a code without one fails typecheck. */
export const ERROR_SUGGESTIONS: Readonly<Record<ErrorCode, string>> = {
  BAD_REQUEST: 'fix the field the message names',
  INVALID_FRAME: 'send frames as the WebSocket reference describes',
  UNKNOWN_FRAME_TYPE: 'check the frame type against the protocol version',
  FRAME_TOO_LARGE: 'send large inputs as files',
  COMMAND_TOO_LARGE: 'write the script to a file and run the file',
  INVALID_COMMAND: 'pass binary data as stdin or in a file',
  UNSUPPORTED_PROTOCOL_VERSION: 'upgrade the SDK or the runner',
  UNAUTHORIZED: 'check the API key, or mint a new token',
  FORBIDDEN: 'use the API key, or a token of this sandbox',
  NOT_FOUND: 'check the path against the API reference',
  SANDBOX_NOT_FOUND: 'list sandboxes with Sandbox.list()',
  SESSION_NOT_FOUND: 'list sessions with sb.listSessions()',
  PROCESS_NOT_FOUND: 'list processes with sb.listProcesses()',
  FILE_NOT_FOUND: 'check the path with sb.files.list()',
  HISTORY_NOT_FOUND: 'read valid indexes from the history',
  SNAPSHOT_NOT_FOUND: 'list the snapshots to see which exist',
  SNAPSHOT_TOO_LARGE: 'remove large files from the workspace or raise the runner snapshot limits',
  SNAPSHOT_INCOMPATIBLE: 'take a new snapshot with this runner',
  TOO_MANY_SNAPSHOTS: 'delete snapshots you no longer need',
  SESSION_BUSY: 'wait for the run to finish or interrupt it, then try again',
  PORT_NOT_LISTENING: 'start the server on 127.0.0.1 inside the sandbox, then retry',
  TERMINAL_NOT_FOUND: 'list the terminals to see which are open',
  TOO_MANY_TERMINALS: 'close terminals you no longer need',
  TOO_MANY_EXPOSED_PORTS: 'unexpose ports you no longer need, or raise --max-exposed-ports-per-sandbox',
  TOO_MANY_CONNECTIONS:
    'close connections to or from the sandbox you no longer use, and reuse keep-alive ones',
  SSH_HOST_UNKNOWN: 'name a host from the runner ssh hosts file',
  SSH_HOST_KEY_REJECTED: 'check the host key and the known_hosts file the operator configured',
  SESSION_EXISTS: 'pick another id, or attach to the session',
  SESSION_PROTECTED: 'create another session for separate state',
  SHELL_CLOSED: 'open a new shell to continue',
  SANDBOX_NOT_RUNNING: 'create a new sandbox',
  PATH_OUTSIDE_SANDBOX: 'use a path under /workspace',
  NOT_A_DIRECTORY: 'name a directory',
  IS_A_DIRECTORY: 'name a file',
  FILE_EXISTS: 'remove the target, or choose another name',
  DIRECTORY_NOT_EMPTY: 'pass recursive: true to remove its contents too',
  OUTPUT_LOST: 'run the command again for its full output',
  LIMITS_NOT_ENFORCEABLE: 'leave the limit out, or set up the host as the message says',
  TOO_MANY_SANDBOXES: 'destroy sandboxes you no longer need',
  TOO_MANY_SESSIONS: 'delete sessions you no longer need',
  TOO_MANY_PROCESSES: 'kill processes you no longer need',
  RATE_LIMITED: 'wait for queued work to finish',
  DEADLINE_EXCEEDED: 'check that the runner is up and not overloaded',
  AGENT_UNAVAILABLE: 'retry shortly, or read the sandbox status',
  RUNNER_UNAVAILABLE: 'retry shortly; the runner may be restarting',
  CONNECTION_LOST: 'check the network, then reattach the shell',
  INTERNAL: "retry once, then read the runner's log",
}
