// The hand-written half of the errors reference: for every `ErrorCode`, when it happens and what
// to do. The page joins this with `ErrorCode.options` and `ERROR_STATUS`. The `Record` type makes
// a new code without an entry fail typecheck, and test/errors-drift.test.ts checks the built page.
import type { ErrorCode } from '@conch/protocol'

/** What a user needs to know about one error code. */
export interface ErrorGuideEntry {
  /** When the runner or the SDK reports it. */
  when: string
  /** What to do about it. */
  fix: string
  /** The `@conch/sdk` class a call rejects with for this code (test/errors-drift.test.ts checks it). */
  sdkClass: SdkErrorClass
}

/** The names of the SDK's error classes. */
export type SdkErrorClass =
  | 'ConchError'
  | 'ShellClosedError'
  | 'SandboxNotFoundError'
  | 'SessionNotFoundError'
  | 'AuthError'
  | 'RateLimitError'
  | 'OutputLostError'
  | 'ConnectionError'
  | 'DeadlineError'

/** One entry per error code. */
export const ERROR_GUIDE: Record<ErrorCode, ErrorGuideEntry> = {
  BAD_REQUEST: {
    when: 'A REST body, path parameter or query string did not match the schema of the route: a missing field, a wrong type, an id with characters outside its pattern, or `stdin` data over 1 MiB. The message names the field.',
    fix: 'Fix the request. The [REST API reference](/reference/rest-api/) lists every field with its type and constraints.',
    sdkClass: 'ConchError',
  },
  INVALID_FRAME: {
    when: 'A WebSocket message was not valid UTF-8 or not valid JSON, or its fields did not match the frame schema for its `type`. The socket and the shell stay open. A client that breaks WebSocket framing itself gets this error frame and then a close with reason `INVALID_FRAME`.',
    fix: 'Send frames as the [WebSocket reference](/reference/websocket/) describes them. The SDK never sends an invalid frame; this comes from hand-written clients.',
    sdkClass: 'ConchError',
  },
  UNKNOWN_FRAME_TYPE: {
    when: 'A WebSocket message had a `type` that this protocol version does not define.',
    fix: "Check the frame name, and compare `protocolVersion` in the runner's `hello` with the version your client speaks.",
    sdkClass: 'ConchError',
  },
  FRAME_TOO_LARGE: {
    when: 'A WebSocket message was larger than the runner accepts (4 MiB by default; a message more than 1 MiB above that gets this error frame and then closes the socket with code 1009 and reason `FRAME_TOO_LARGE`), or a file read with `?encoding=` was too large for a JSON answer.',
    fix: 'Send large inputs as files (`sb.files.write`) and read them from the command, instead of inlining them in a frame. Read large files as raw bytes, without `?encoding=`.',
    sdkClass: 'ConchError',
  },
  COMMAND_TOO_LARGE: {
    when: "The command text exceeded the runner's limit (1 MiB of UTF-8 by default, `--max-command-bytes`).",
    fix: 'Write the script to a file in the sandbox first (`sb.files.write`), then run `bash script.sh`.',
    sdkClass: 'ConchError',
  },
  INVALID_COMMAND: {
    when: "The command text cannot be run at all, for example because it contains a NUL byte. A bash syntax error is not this error: it is a normal result with exit code 2 and bash's message on stderr.",
    fix: 'Remove the NUL bytes. Pass binary data through `stdin` with base64 encoding, or through a file.',
    sdkClass: 'ConchError',
  },
  UNSUPPORTED_PROTOCOL_VERSION: {
    when: "The client's `hello` announced a `protocolVersion` the runner does not speak.",
    fix: 'Upgrade the SDK or the runner so that both speak the same protocol version. Fields grow additively, so a newer runner keeps accepting older clients of the same version.',
    sdkClass: 'ConchError',
  },
  UNAUTHORIZED: {
    when: 'The request had no credential, or the API key or sandbox-scoped token was wrong or expired. A shell socket opened with a token gets this error frame when the token expires, then closes with code 4401 and reason `UNAUTHORIZED`.',
    fix: "Send `Authorization: Bearer <key>` with the runner's `CONCH_API_KEY`, or mint a new token with `sb.createAccessToken()` if the old one expired.",
    sdkClass: 'AuthError',
  },
  FORBIDDEN: {
    when: 'The credential is valid but does not cover this request: a sandbox-scoped token was used for another sandbox, or for a runner-wide route such as creating or listing sandboxes.',
    fix: 'Use the runner API key for runner-wide routes, and a token minted for this sandbox for its routes.',
    sdkClass: 'AuthError',
  },
  NOT_FOUND: {
    when: 'No route matches the method and path.',
    fix: 'Check the path against the [REST API reference](/reference/rest-api/). All API routes start with `/v1`.',
    sdkClass: 'ConchError',
  },
  SANDBOX_NOT_FOUND: {
    when: 'No sandbox has this id: it never existed, it was destroyed, or its idle timeout destroyed it.',
    fix: 'List the sandboxes with `Sandbox.list()` and create a new one if yours is gone.',
    sdkClass: 'SandboxNotFoundError',
  },
  SESSION_NOT_FOUND: {
    when: 'The sandbox has no session with this id, for example after `deleteSession`, or when a session id was mistyped while reattaching.',
    fix: 'List the sessions with `sb.listSessions()`. Create the session with `sb.createSession({ id })` if it should exist.',
    sdkClass: 'SessionNotFoundError',
  },
  PROCESS_NOT_FOUND: {
    when: 'The sandbox has no background process with this id.',
    fix: 'List the processes with `sb.listProcesses()`. Process ids look like `proc_…`; they are not OS pids.',
    sdkClass: 'ConchError',
  },
  FILE_NOT_FOUND: {
    when: 'A files call named a path that does not exist in the sandbox.',
    fix: 'Check the path. Relative paths are resolved against `/workspace`. List the directory with `sb.files.list()`.',
    sdkClass: 'ConchError',
  },
  HISTORY_NOT_FOUND: {
    when: "A history replay named an index that the session's history does not have.",
    fix: "Read the indexes from `sh.history()` first; they start at 0 and are stable for the session's life.",
    sdkClass: 'ConchError',
  },
  SESSION_BUSY: {
    when: 'A snapshot waited for a session that kept running a command (its state is read between runs).',
    fix: 'Wait for the run to finish, or interrupt it (`sh.interrupt()`), then take the snapshot again; `details.sessionId` names the session.',
    sdkClass: 'ConchError',
  },
  SNAPSHOT_NOT_FOUND: {
    when: 'A snapshot id names no snapshot on this runner (it was deleted, or taken on another runner).',
    fix: 'List the snapshots with `Sandbox.listSnapshots()` and use one of their ids; snapshots live in the state dir of the runner that took them.',
    sdkClass: 'ConchError',
  },
  SNAPSHOT_TOO_LARGE: {
    when: "A snapshot would hold more bytes or entries than the runner's snapshot limits, or the store is full.",
    fix: 'Delete large files, build outputs and caches from the workspace (a sparse file counts at its full size), delete old snapshots, or ask the operator to raise `--max-snapshot-bytes`.',
    sdkClass: 'ConchError',
  },
  SNAPSHOT_INCOMPATIBLE: {
    when: 'A snapshot was written in a format version this runner does not read, or its stored data is damaged.',
    fix: 'Restore it on a runner of the version that took it, or take a new snapshot; `details.formatVersion` names the version.',
    sdkClass: 'ConchError',
  },
  TOO_MANY_SNAPSHOTS: {
    when: 'The runner already keeps its limit of snapshots (`--max-snapshots`).',
    fix: 'Delete snapshots you no longer need with `sandbox.deleteSnapshot(id)`, or ask the operator to raise `--max-snapshots`.',
    sdkClass: 'ConchError',
  },
  SESSION_EXISTS: {
    when: 'A session was created with an id that the sandbox already uses.',
    fix: 'Pick another id, or attach to the existing session with `sb.reattachShell(id)`.',
    sdkClass: 'ConchError',
  },
  SESSION_PROTECTED: {
    when: 'A call tried to delete the `default` session, which every sandbox keeps.',
    fix: 'Delete your own sessions only. To reset the default shell, run `exec bash` in it or destroy the sandbox.',
    sdkClass: 'ConchError',
  },
  SHELL_CLOSED: {
    when: "The session's bash has ended: `exit N`, an `exec` into a program that ended, bash being killed, or bash not recovering after a timeout. The pending run and every later run on that shell fail with this code. The details carry `code`, `signal` and `reason`.",
    fix: 'Open a new shell with `sb.shell()` or a new session.',
    sdkClass: 'ShellClosedError',
  },
  SANDBOX_NOT_RUNNING: {
    when: 'The sandbox exists but its agent is not running: it is still starting, or it died (`status: dead`, with `deadReason`).',
    fix: 'Read `deadReason` from `Sandbox.connect(id)` or `GET /v1/sandboxes/:id`. A dead sandbox does not come back; destroy it and create a new one.',
    sdkClass: 'ConchError',
  },
  PORT_NOT_LISTENING: {
    when: "A request through `/v1/sandboxes/:id/ports/:port/` found nothing listening on that port on the sandbox's loopback (127.0.0.1 or ::1).",
    fix: 'Start the server inside the sandbox first (a background process), and check `sb.ports()`; a server bound to another interface than loopback or 0.0.0.0 cannot be reached.',
    sdkClass: 'ConchError',
  },
  PATH_OUTSIDE_SANDBOX: {
    when: 'A files call named a path that resolves outside `/workspace`, through `..` or a symlink.',
    fix: 'Use paths under `/workspace`. Symlinks are reported by `list` and `stat`, never followed out of the sandbox.',
    sdkClass: 'ConchError',
  },
  NOT_A_DIRECTORY: {
    when: 'A directory operation (`list`, or `mkdir` under a parent) met a file where a directory was expected.',
    fix: 'Check the path with `sb.files.stat()` first.',
    sdkClass: 'ConchError',
  },
  IS_A_DIRECTORY: {
    when: 'A file operation (`read`, `write`) named a directory.',
    fix: 'Name a file, or use `sb.files.list()` for a directory.',
    sdkClass: 'ConchError',
  },
  TERMINAL_NOT_FOUND: {
    when: 'No terminal with this id exists in the sandbox: it was closed, its program exited and it was closed, or the id is wrong.',
    fix: 'List live terminals with `sb.listTerminals()` and open a new one with `sb.terminal()`.',
    sdkClass: 'ConchError',
  },
  FILE_EXISTS: {
    when: 'A `mkdir` or `rename` would overwrite something that already exists.',
    fix: 'Remove the target first, or choose another name.',
    sdkClass: 'ConchError',
  },
  DIRECTORY_NOT_EMPTY: {
    when: 'A remove without `recursive` named a directory that still has entries.',
    fix: 'Pass `recursive: true` to remove the directory and everything in it.',
    sdkClass: 'ConchError',
  },
  OUTPUT_LOST: {
    when: 'A client reattached from a byte offset that the bounded scrollback has already evicted. The client would have missed output, so it gets this error instead of silence. `details.earliestOffset` is the oldest offset still kept.',
    fix: "Resume from `details.earliestOffset` if a gap is acceptable, or treat the run's output as incomplete. Reattach sooner, or raise the scrollback size, to avoid it.",
    sdkClass: 'OutputLostError',
  },
  LIMITS_NOT_ENFORCEABLE: {
    when: "A create request set a limit (`memoryBytes`, `cpus`, `pids` or `diskBytes`) that the sandbox's driver cannot enforce on this host: any limit on the `local` driver, or on a runner that is not root, memory and CPU without a delegated cgroup v2 subtree and disk always. The message names the limit and what is missing. The runner never accepts a limit it would not enforce.",
    fix: 'Leave the limit out (the sandbox then gets only the limits the runner enforces, shown in its `limits` and `description`), or have the operator give the runner what the message names: a systemd unit with `Delegate=yes` on a cgroup v2 host for memory and CPU, root for a disk limit.',
    sdkClass: 'ConchError',
  },
  TOO_MANY_SANDBOXES: {
    when: 'The runner already has as many sandboxes as its limit allows (32 by default).',
    fix: "Destroy sandboxes you no longer need (`sb.destroy()`), or raise the runner's limit.",
    sdkClass: 'RateLimitError',
  },
  TOO_MANY_SESSIONS: {
    when: 'The sandbox already has as many sessions as its limit allows (64 by default).',
    fix: 'Delete sessions you no longer need with `sb.deleteSession(id)`.',
    sdkClass: 'RateLimitError',
  },
  TOO_MANY_PROCESSES: {
    when: 'The sandbox already has as many background processes as its limit allows (64 by default).',
    fix: 'Kill processes you no longer need with `p.kill()`.',
    sdkClass: 'RateLimitError',
  },
  TOO_MANY_TERMINALS: {
    when: 'The sandbox already has as many terminals as its limit allows (16 by default).',
    fix: 'Close terminals you no longer need with `term.close()` or `DELETE /v1/sandboxes/:id/terminals/:terminalId`.',
    sdkClass: 'RateLimitError',
  },
  TOO_MANY_EXPOSED_PORTS: {
    when: 'The sandbox already has as many distinct ports exposed as the runner allows (32 by default, `--max-exposed-ports-per-sandbox`). Exposing a port again (a new token) does not count twice.',
    fix: 'Unexpose ports you no longer need with `sb.unexposePort(port)` or `DELETE /v1/sandboxes/:id/exposed-ports/:port`, or ask the operator to raise the limit.',
    sdkClass: 'RateLimitError',
  },
  TOO_MANY_CONNECTIONS: {
    when: "The sandbox already has as many port-relay and egress connections open as the runner allows (256 by default, `--max-network-connections-per-sandbox`). A relayed request gets a 429 with this code; a program in the sandbox gets the same code in its proxy's 429 answer. Other sandboxes are not affected.",
    fix: 'Close connections you no longer use and reuse keep-alive connections; or ask the operator to raise the limit.',
    sdkClass: 'RateLimitError',
  },
  RATE_LIMITED: {
    when: 'Too much at once: more runs waiting on a sandbox than the runner accepts (1024 by default), more shell sockets on one session (32), or more connections from one client address (1024) or in all (4096, lowered to fit the open-file limit). A refused connection gets a 429 with this code and is closed.',
    fix: 'Wait for queued runs to finish before sending more; close shell sockets and connections you no longer use, and reuse keep-alive connections.',
    sdkClass: 'RateLimitError',
  },
  DEADLINE_EXCEEDED: {
    when: "A call did not complete before its deadline: the SDK's client-side deadline, or a wait that gave up. A command that runs past its own timeout is not this error; it returns `timedOut: true`.",
    fix: 'Check that the runner is reachable and not overloaded. For long commands, raise `timeoutMs` on the run rather than waiting on the client side.',
    sdkClass: 'DeadlineError',
  },
  AGENT_UNAVAILABLE: {
    when: "The runner could not reach the sandbox's agent, for example while a runner that just restarted is reconnecting to its agents.",
    fix: "Retry after a short wait. If it persists, read the sandbox's `status` and `deadReason`.",
    sdkClass: 'ConnectionError',
  },
  SSH_HOST_UNKNOWN: {
    when: 'A create request for the `ssh` driver named a `host` the operator did not configure (`--ssh-hosts`), or named none while several are configured. The message and `details.hosts` list the configured names.',
    fix: "Pass one of the configured host names in `host`. Requests can never give an address: the operator adds hosts to the runner's hosts file.",
    sdkClass: 'ConchError',
  },
  SSH_HOST_KEY_REJECTED: {
    when: 'The SSH host presented a host key that is not in its known_hosts file (or differs from it, or is revoked). The runner ended the handshake before logging in: neither the user nor a key signature was sent.',
    fix: "If the host was really rebuilt, the operator checks its new key out of band and updates the known_hosts file named in the runner's hosts file; otherwise treat it as an attack on the connection.",
    sdkClass: 'ConchError',
  },
  RUNNER_UNAVAILABLE: {
    when: 'A router could not reach the runner that holds the sandbox (it is down or restarting), or no runner behind the router is ready to take a new sandbox. The message names the runner shard.',
    fix: "Retry after a short wait: the SDK does, with backoff. A runner that restarts keeps its sandboxes, and they answer again once it is back. If it persists, check the runner pods (`kubectl get pods`) and the router's `/readyz`.",
    sdkClass: 'ConnectionError',
  },
  CONNECTION_LOST: {
    when: 'The connection between the client and the runner, or between the runner and an agent, dropped while a call was in flight.',
    fix: 'The SDK reconnects with backoff and resumes from the last byte offset it saw, so a run usually completes anyway. If it gives up, it throws `ConnectionError`; check the network and the runner.',
    sdkClass: 'ConnectionError',
  },
  INTERNAL: {
    when: 'The runner or the agent hit a bug.',
    fix: "Retry once. Then read the runner's logs for the request, and report the message with the ids it names.",
    sdkClass: 'ConchError',
  },
}
