import { z } from 'zod'
import { FileInfo, SandboxPath } from './file.ts'
import { Encoding, EnvName, Offset, SessionId, TimeoutMs } from './primitives.ts'
import { ProcessInfo, ProcessOptions } from './process.ts'
import { BoundedEnv, SandboxInfo } from './sandbox.ts'
import { HistoryEntry, SessionInfo } from './session.ts'
import { SnapshotInfo } from './snapshot.ts'

/** Standard base64 (RFC 4648 section 4), padding optional. */
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}(?:==)?|[A-Za-z0-9+/]{3}=?)?$/

/** True when `text` is standard base64; the check `stdinEncoding: base64` bodies get. */
export function isBase64(text: string): boolean {
  return BASE64.test(text)
}

/** Adds a `stdin` issue when `stdinEncoding` is base64 and `stdin` is not. */
function checkStdin(
  body: { stdin?: string | undefined; stdinEncoding?: Encoding | undefined },
  ctx: z.RefinementCtx,
): void {
  if (body.stdinEncoding === 'base64' && body.stdin !== undefined && !isBase64(body.stdin)) {
    ctx.addIssue({
      code: 'custom',
      path: ['stdin'],
      message: 'not valid base64 (stdinEncoding is base64: use A-Z a-z 0-9 + / with optional = padding)',
    })
  }
}

/** Body of `POST /v1/sandboxes/:id/exec`: one command, in a fresh process or in a session's shell. */
export const ExecRequest = z
  .object({
    /** Command text, run by `bash -c` (or in the session's shell when `sessionId` is set). */
    command: z.string(),
    /** Working directory of a fresh process. */
    cwd: z.string().min(1).max(4096).optional(),
    /** Variables added to a fresh process's environment (at most 1024 variables, 256 KiB). */
    env: BoundedEnv.optional(),
    /** Data for stdin; without it stdin is /dev/null. */
    stdin: z.string().optional(),
    /** Encoding of `stdin`; default `utf8`. */
    stdinEncoding: Encoding.optional(),
    /** Timeout, clamped between 1 s and the runner's maximum. */
    timeoutMs: TimeoutMs.optional(),
    /** Encoding of stdout/stderr in the result; default `utf8`. */
    encoding: Encoding.optional(),
    /** Run in this session's shell instead of a fresh process (state persists). */
    sessionId: SessionId.optional(),
    /** Answer with NDJSON `ExecEvent`s while it runs instead of one buffered result. */
    stream: z.boolean().optional(),
  })
  .superRefine(checkStdin)
/** Exec options. */
export type ExecRequest = z.infer<typeof ExecRequest>

/** One line of a streamed exec or process stream (NDJSON). */
export const ExecEvent = z.discriminatedUnion('type', [
  z.object({
    type: z.literal('stdout'),
    /** Bytes, in the requested encoding. */
    data: z.string(),
    /** Output log offset of the first byte. */
    offset: Offset,
  }),
  z.object({
    type: z.literal('stderr'),
    /** Bytes, in the requested encoding. */
    data: z.string(),
    /** Output log offset of the first byte. */
    offset: Offset,
  }),
  z.object({
    type: z.literal('exit'),
    /** Exit code, 128+n for signal n. */
    exitCode: z.number().int(),
    /** True when the timeout stopped it. */
    timedOut: z.boolean(),
    /** Wall time. */
    durationMs: z.number().nonnegative(),
    /** True when the sandbox's memory limit killed the command (exit code 137); absent otherwise. */
    oomKilled: z.boolean().optional(),
  }),
  z.object({
    type: z.literal('error'),
    /** Error code. */
    code: z.string(),
    /** What happened. */
    message: z.string(),
  }),
])
/** A streamed exec event. */
export type ExecEvent = z.infer<typeof ExecEvent>

/** Path parameters of sandbox routes. */
export const SandboxParams = z.object({ id: z.string() })
/** The type `SandboxParams` parses to. */
export type SandboxParams = z.infer<typeof SandboxParams>
/** Path parameters of session routes. */
export const SessionParams = z.object({ id: z.string(), sessionId: z.string() })
/** The type `SessionParams` parses to. */
export type SessionParams = z.infer<typeof SessionParams>
/** Path parameters of session env/alias routes. */
export const NamedParams = z.object({ id: z.string(), sessionId: z.string(), name: z.string() })
/** The type `NamedParams` parses to. */
export type NamedParams = z.infer<typeof NamedParams>
/** Path parameters of history replay. */
export const HistoryParams = z.object({
  id: z.string(),
  sessionId: z.string(),
  index: z.coerce.number().int(),
})
/** The type `HistoryParams` parses to. */
export type HistoryParams = z.infer<typeof HistoryParams>
/** Path parameters of process routes. */
export const ProcessParams = z.object({ id: z.string(), processId: z.string() })
/** The type `ProcessParams` parses to. */
export type ProcessParams = z.infer<typeof ProcessParams>

/** `GET /v1/sandboxes` answer. */
export const SandboxList = z.object({ sandboxes: z.array(SandboxInfo) })
/** The type `SandboxList` parses to. */
export type SandboxList = z.infer<typeof SandboxList>
/** Path parameters of `/v1/snapshots/:snapshotId`. */
export const SnapshotParams = z.object({ snapshotId: z.string() })
/** The type `SnapshotParams` parses to. */
export type SnapshotParams = z.infer<typeof SnapshotParams>
/** Body of `POST /v1/sandboxes/:id/snapshots`. */
export const SnapshotRequest = z.object({
  /** A name to recognise the snapshot by (not unique). */
  name: z.string().min(1).max(256).optional(),
})
/** The type `SnapshotRequest` parses to. */
export type SnapshotRequest = z.infer<typeof SnapshotRequest>
/** `GET .../snapshots` answer, oldest first. */
export const SnapshotList = z.object({ snapshots: z.array(SnapshotInfo) })
/** The type `SnapshotList` parses to. */
export type SnapshotList = z.infer<typeof SnapshotList>
/** `GET .../sessions` answer. */
export const SessionList = z.object({ sessions: z.array(SessionInfo) })
/** The type `SessionList` parses to. */
export type SessionList = z.infer<typeof SessionList>
/** Body of `POST .../processes`: the process's options, and whether it keeps the sandbox awake. */
export const StartProcessRequest = ProcessOptions.extend({
  /**
   * Keep the sandbox awake (no idle hibernation or deletion) while this process runs, for at
   * most the runner's keep-alive cap (24 hours unless its operator changed it) from its start.
   * At most 16 such processes per sandbox.
   */
  keepAlive: z.boolean().optional(),
})
/** The type `StartProcessRequest` parses to. */
export type StartProcessRequest = z.infer<typeof StartProcessRequest>
/** `GET .../processes` answer. */
export const ProcessList = z.object({ processes: z.array(ProcessInfo) })
/** The type `ProcessList` parses to. */
export type ProcessList = z.infer<typeof ProcessList>
/** `GET .../files/list` answer. */
export const FileList = z.object({ entries: z.array(FileInfo) })
/** The type `FileList` parses to. */
export type FileList = z.infer<typeof FileList>
/** `GET .../history` answer. */
export const HistoryList = z.object({ entries: z.array(HistoryEntry) })
/** The type `HistoryList` parses to. */
export type HistoryList = z.infer<typeof HistoryList>

/** `GET .../env` answer: the shell's exported variables. */
export const EnvMap = z.object({ env: z.record(z.string(), z.string()) })
/** The type `EnvMap` parses to. */
export type EnvMap = z.infer<typeof EnvMap>
/** `GET .../env/:name` answer. */
export const EnvValue = z.object({ name: EnvName, value: z.string().nullable() })
/** The type `EnvValue` parses to. */
export type EnvValue = z.infer<typeof EnvValue>
/** Body of `PUT .../env/:name` and `PUT .../aliases/:name`. */
export const SetValueRequest = z.object({ value: z.string().refine((v) => !v.includes('\0'), 'no NUL') })
/** The type `SetValueRequest` parses to. */
export type SetValueRequest = z.infer<typeof SetValueRequest>
/** `GET .../aliases` answer. */
export const AliasMap = z.object({ aliases: z.record(z.string(), z.string()) })
/** The type `AliasMap` parses to. */
export type AliasMap = z.infer<typeof AliasMap>

/** Body of `POST .../sessions/:sessionId/run`: a buffered run in the session's shell. */
export const SessionRunRequest = z
  .object({
    /** Command text. */
    command: z.string(),
    /** Timeout, clamped. */
    timeoutMs: TimeoutMs.optional(),
    /** Data for stdin. */
    stdin: z.string().optional(),
    /** Encoding of `stdin`. */
    stdinEncoding: Encoding.optional(),
    /** Encoding of the result's output. */
    encoding: Encoding.optional(),
  })
  .superRefine(checkStdin)
/** A REST session run. */
export type SessionRunRequest = z.infer<typeof SessionRunRequest>

/** Query of `GET .../processes/:processId/output`. */
export const ProcessOutputQuery = z.object({
  /** Output log offset to start from; 0 for everything still kept. */
  since: z.coerce.number().int().nonnegative().optional(),
  /** Encoding of the answer. */
  encoding: Encoding.optional(),
})
/** The type `ProcessOutputQuery` parses to. */
export type ProcessOutputQuery = z.infer<typeof ProcessOutputQuery>

/** Body of `POST .../processes/:processId/kill`. */
export const KillRequest = z.object({
  /** Signal to send first; default SIGTERM, then SIGKILL after 3 s. */
  signal: z.enum(['SIGTERM', 'SIGKILL', 'SIGINT', 'SIGHUP']).optional(),
})
/** The type `KillRequest` parses to. */
export type KillRequest = z.infer<typeof KillRequest>

/** Body of `POST .../processes/:processId/wait`. */
export const WaitRequest = z.object({
  /** Give up waiting after this long (the process keeps running). */
  timeoutMs: TimeoutMs.optional(),
})
/** The type `WaitRequest` parses to. */
export type WaitRequest = z.infer<typeof WaitRequest>

/** Query of the files routes that take one path. */
export const PathQuery = z.object({
  /** Sandbox path. */
  path: SandboxPath,
  /** For reads: return JSON `{content, encoding}` in this encoding instead of raw bytes. */
  encoding: Encoding.optional(),
})
/** The type `PathQuery` parses to. */
export type PathQuery = z.infer<typeof PathQuery>

/** Body of `POST .../files/mkdir`. */
export const MkdirRequest = z.object({
  /** Directory to create. */
  path: SandboxPath,
  /** Create missing parents; no error if it exists. */
  recursive: z.boolean().optional(),
})
/** The type `MkdirRequest` parses to. */
export type MkdirRequest = z.infer<typeof MkdirRequest>
/** Body of `POST .../files/remove`. */
export const RemoveRequest = z.object({
  /** Path to remove. */
  path: SandboxPath,
  /** Remove directories with their contents. */
  recursive: z.boolean().optional(),
})
/** The type `RemoveRequest` parses to. */
export type RemoveRequest = z.infer<typeof RemoveRequest>
/** Body of `POST .../files/rename`. */
export const RenameRequest = z.object({
  /** Existing path. */
  from: SandboxPath,
  /** New path. */
  to: SandboxPath,
})
/** The type `RenameRequest` parses to. */
export type RenameRequest = z.infer<typeof RenameRequest>
/** JSON answer of a file read with `?encoding=`. */
export const FileContent = z.object({ path: z.string(), content: z.string(), encoding: Encoding })
/** The type `FileContent` parses to. */
export type FileContent = z.infer<typeof FileContent>

/** `GET /healthz` and `GET /readyz` answer. */
export const Health = z.object({
  /** True when healthy (or ready). */
  ok: z.boolean(),
  /** Runner version. */
  version: z.string(),
  /** Facts behind the answer. */
  checks: z.record(z.string(), z.boolean()).optional(),
  /** The runner's shard name, when it has one (`/readyz` only). */
  shard: z.string().optional(),
  /** How full the runner is, for a router's placement (`/readyz` only). */
  load: z
    .object({
      /** Sandboxes alive now. */
      sandboxes: z.number().int().nonnegative(),
      /** Sandboxes the runner accepts at most. */
      maxSandboxes: z.number().int().positive(),
    })
    .optional(),
})
/** The type `Health` parses to. */
export type Health = z.infer<typeof Health>

/** The empty success body. */
export const Ok = z.object({ ok: z.literal(true) })
/** The type `Ok` parses to. */
export type Ok = z.infer<typeof Ok>
