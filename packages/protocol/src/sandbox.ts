import { z } from 'zod'
import { NetworkPolicy } from './network.ts'
import { Env, EnvName, SandboxId, TimeoutMs, Timestamp } from './primitives.ts'
import { SandboxUsage } from './sandbox-usage.ts'
import { RestoredSession, SnapshotId } from './snapshot.ts'

const MiB = 1024 * 1024

/**
 * Bounds on what a create request may ask for. The minimums are what a sandbox needs to start
 * its agent and run bash; the maximums keep a request from asking for more than a host has or
 * than the kernel takes in one argument list (the environment becomes sandbox arguments).
 */
export const SANDBOX_BOUNDS = {
  /** Smallest memory limit: bash, coreutils and a small build step fit in it. */
  minMemoryBytes: 64 * MiB,
  /** Largest memory limit (1 TiB). */
  maxMemoryBytes: 1024 * 1024 * MiB,
  /**
   * Smallest CPU limit in cores. The agent needs about 0.7 CPU-seconds to start: at 0.1 cores
   * that is about 7 s of the runner's 15 s start deadline; at 0.05 it misses the deadline.
   */
  minCpus: 0.1,
  /** Largest CPU limit in cores. */
  maxCpus: 256,
  /** Smallest process limit: the agent's threads, a shell, a pipeline and a few background jobs. */
  minPids: 32,
  /** Largest process limit (the kernel's highest pid_max). */
  maxPids: 4_194_304,
  /** Smallest workspace: the ext4 disk image the workspace lives on needs room for its journal. */
  minDiskBytes: 64 * MiB,
  /** Largest workspace (16 TiB, ext4's limit for a 4 KiB block size). */
  maxDiskBytes: 16 * 1024 * 1024 * MiB,
  /** Most environment variables in one request. */
  maxEnvVars: 1024,
  /** Most bytes of environment (names, values and `=`) in one request. */
  maxEnvBytes: 256 * 1024,
  /** Most metadata labels. */
  maxMetadataKeys: 64,
  /** Longest metadata key, in characters. */
  maxMetadataKeyLength: 128,
  /** Longest metadata value, in characters. */
  maxMetadataValueLength: 1024,
  /** Most metadata bytes (keys and values, UTF-8). */
  maxMetadataBytes: 16 * 1024,
} as const

const mib = (bytes: number): string => `${bytes / MiB} MiB`
const utf8 = new TextEncoder()
/** UTF-8 length of a string (TextEncoder, so the schema also runs in browsers). */
const utf8Length = (s: string): number => utf8.encode(s).byteLength

/**
 * Environment variables for a sandbox or a command, bounded in count and total size. Names are
 * checked here rather than as record keys, so a bad name's message says what names may be.
 */
export const BoundedEnv = z.record(z.string(), Env.valueType).superRefine((env, ctx) => {
  const names = Object.keys(env)
  if (names.length > SANDBOX_BOUNDS.maxEnvVars) {
    ctx.addIssue({
      code: 'custom',
      message: `${names.length} variables; at most ${SANDBOX_BOUNDS.maxEnvVars} are accepted`,
    })
    return
  }
  let bytes = 0
  for (const name of names) {
    const named = EnvName.safeParse(name)
    if (!named.success) {
      ctx.addIssue({ code: 'custom', path: [name], message: named.error.issues[0]?.message ?? 'bad name' })
    }
    bytes += utf8Length(name) + utf8Length(env[name] ?? '') + 1
  }
  if (bytes > SANDBOX_BOUNDS.maxEnvBytes) {
    ctx.addIssue({
      code: 'custom',
      message: `${bytes} bytes of variables; at most ${SANDBOX_BOUNDS.maxEnvBytes} are accepted (put large values in a file)`,
    })
  }
})
/** A `BoundedEnv`. */
export type BoundedEnv = z.infer<typeof BoundedEnv>

/** How strongly a driver isolates a sandbox from the host. */
export const Isolation = z.enum(['none', 'namespace', 'vm'])
/** An isolation level. */
export type Isolation = z.infer<typeof Isolation>

/** Resource limits of a sandbox as the runner reports them; drivers without isolation record but cannot enforce them. */
export const SandboxLimits = z.object({
  /** Memory limit in bytes. */
  memoryBytes: z.number().int().positive().optional(),
  /** CPU limit in cores (0.5 = half a core). */
  cpus: z.number().positive().max(256).optional(),
  /** Process count limit. */
  pids: z.number().int().positive().optional(),
  /** Workspace size limit in bytes. */
  diskBytes: z.number().int().positive().optional(),
})
/** Sandbox limits. */
export type SandboxLimits = z.infer<typeof SandboxLimits>

/** Resource limits a create request may ask for: each within `SANDBOX_BOUNDS`. */
export const RequestedLimits = z.object({
  /** Memory limit in bytes, from 64 MiB to 1 TiB. */
  memoryBytes: z
    .number()
    .int()
    .min(
      SANDBOX_BOUNDS.minMemoryBytes,
      `at least ${SANDBOX_BOUNDS.minMemoryBytes} (${mib(SANDBOX_BOUNDS.minMemoryBytes)})`,
    )
    .max(SANDBOX_BOUNDS.maxMemoryBytes, `at most ${SANDBOX_BOUNDS.maxMemoryBytes} (1 TiB)`)
    .optional(),
  /** CPU limit in cores (0.5 = half a core), from 0.1 to 256. */
  cpus: z
    .number()
    .min(SANDBOX_BOUNDS.minCpus, `at least ${SANDBOX_BOUNDS.minCpus} cores`)
    .max(SANDBOX_BOUNDS.maxCpus, `at most ${SANDBOX_BOUNDS.maxCpus} cores`)
    .optional(),
  /** Process and thread count limit, from 32. */
  pids: z
    .number()
    .int()
    .min(SANDBOX_BOUNDS.minPids, `at least ${SANDBOX_BOUNDS.minPids} (the agent and a shell need them)`)
    .max(SANDBOX_BOUNDS.maxPids, `at most ${SANDBOX_BOUNDS.maxPids}`)
    .optional(),
  /** Workspace size limit in bytes, from 64 MiB to 16 TiB. */
  diskBytes: z
    .number()
    .int()
    .min(
      SANDBOX_BOUNDS.minDiskBytes,
      `at least ${SANDBOX_BOUNDS.minDiskBytes} (${mib(SANDBOX_BOUNDS.minDiskBytes)})`,
    )
    .max(SANDBOX_BOUNDS.maxDiskBytes, `at most ${SANDBOX_BOUNDS.maxDiskBytes} (16 TiB)`)
    .optional(),
})

/** Free-form labels on a sandbox, bounded in count, key length, value length and total size. */
export const Metadata = z
  .record(
    z
      .string()
      .min(1, 'metadata keys may not be empty')
      .max(
        SANDBOX_BOUNDS.maxMetadataKeyLength,
        `metadata keys are at most ${SANDBOX_BOUNDS.maxMetadataKeyLength} characters`,
      ),
    z
      .string()
      .max(
        SANDBOX_BOUNDS.maxMetadataValueLength,
        `metadata values are at most ${SANDBOX_BOUNDS.maxMetadataValueLength} characters`,
      ),
  )
  .superRefine((metadata, ctx) => {
    const keys = Object.keys(metadata)
    if (keys.length > SANDBOX_BOUNDS.maxMetadataKeys) {
      ctx.addIssue({
        code: 'custom',
        message: `${keys.length} keys; at most ${SANDBOX_BOUNDS.maxMetadataKeys} are accepted`,
      })
      return
    }
    let bytes = 0
    for (const key of keys) bytes += utf8Length(key) + utf8Length(metadata[key] ?? '')
    if (bytes > SANDBOX_BOUNDS.maxMetadataBytes) {
      ctx.addIssue({
        code: 'custom',
        message: `${bytes} bytes of metadata; at most ${SANDBOX_BOUNDS.maxMetadataBytes} are accepted`,
      })
    }
  })

/** Body of `POST /v1/sandboxes`. */
export const CreateSandboxRequest = z.object({
  /** Driver name; defaults to the runner's configured driver. */
  driver: z.string().min(1).max(64).optional(),
  /** For the `ssh` driver: the name of an SSH host the operator configured (never an address); optional when only one is configured. */
  host: z
    .string()
    .regex(/^[a-z0-9][a-z0-9_-]{0,62}$/, 'a configured host name: lowercase letters, digits, _ and -')
    .optional(),
  /** Base environment of every session in the sandbox (at most 1024 variables, 256 KiB). */
  env: BoundedEnv.optional(),
  /** Resource limits, each within `SANDBOX_BOUNDS`. */
  limits: RequestedLimits.optional(),
  /**
   * Destroy the sandbox after this long without API activity, connected shells or running
   * commands. Absent: the runner's default (30 minutes unless its operator changed it); `null`:
   * never.
   */
  idleTimeoutMs: TimeoutMs.nullable().optional(),
  /**
   * Hibernate the sandbox after this long idle (same idleness as `idleTimeoutMs`): it is
   * snapshotted and stopped, freeing its memory and processes, and the next request wakes it.
   * Absent: the runner's default (10 minutes unless its operator changed it); `null`: never.
   * Must be shorter than `idleTimeoutMs` when both are given.
   */
  hibernateAfterMs: TimeoutMs.nullable().optional(),
  /**
   * Delete a session (never the default one) after this long with no attached client, no
   * command running or queued and no new output. Absent: the runner's default (1 hour unless its
   * operator changed it); `null`: never.
   */
  sessionIdleTimeoutMs: TimeoutMs.nullable().optional(),
  /** Free-form labels, returned as given (at most 64 keys, 16 KiB). */
  metadata: Metadata.optional(),
  /**
   * Start from this snapshot (a fork): its workspace and every session with its shell state.
   * Settings not given here (driver, env, limits, metadata, the three idle times) are the snapshot's.
   */
  fromSnapshot: SnapshotId.optional(),
  /** With `fromSnapshot`: start again the background processes that were running. */
  restartProcesses: z.boolean().optional(),
  /** Network policy; no egress by default. An allowlist needs a driver with a network namespace. */
  network: NetworkPolicy.optional(),
})
/** Sandbox creation options. */
export type CreateSandboxRequest = z.infer<typeof CreateSandboxRequest>

/** A sandbox's lifecycle status. */
export const SandboxStatus = z.enum(['starting', 'running', 'unreachable', 'hibernated', 'dead', 'destroyed'])
/** A sandbox status. */
export type SandboxStatus = z.infer<typeof SandboxStatus>

/** A sandbox. */
export const SandboxInfo = z.object({
  /** Sandbox id. */
  id: SandboxId,
  /**
   * `running` while its agent answers; `unreachable` while its agent lives but does not answer
   * (the runner keeps retrying, see `deadReason`); `hibernated` while it is stored as a snapshot
   * with nothing running (the next request wakes it); `dead` when the agent died (see `deadReason`).
   */
  status: SandboxStatus,
  /** Driver that created it. */
  driver: z.string(),
  /** What isolates it from the host. */
  isolation: Isolation,
  /** One sentence on what the driver does and does not isolate. */
  description: z.string(),
  /** The workspace directory as its shells see it. */
  workdir: z.string(),
  /** Resource limits. */
  limits: SandboxLimits,
  /** Free-form labels. */
  metadata: z.record(z.string(), z.string()),
  /** When it was created. */
  createdAt: Timestamp,
  /** Why the agent is gone (`dead`) or does not answer (`unreachable`); null otherwise. */
  deadReason: z.string().nullable(),
  /** Idle time after which it is destroyed; null: never (absent from older runners). */
  idleTimeoutMs: z.number().int().nonnegative().nullable().optional(),
  /** Idle time after which it hibernates; null: never (absent from older runners). */
  hibernateAfterMs: z.number().int().nonnegative().nullable().optional(),
  /** Idle time after which one of its sessions is deleted; null: never (absent from older runners). */
  sessionIdleTimeoutMs: z.number().int().nonnegative().nullable().optional(),
  /** When its idle time started (its last request, client or command); absent from older runners. */
  lastActivityAt: Timestamp.optional(),
  /** Until when a keep-alive holds it awake; null when none does (absent from older runners). */
  keepAliveUntil: Timestamp.nullable().optional(),
  /** The snapshot it was restored from, and how; absent when it started empty. */
  restoredFrom: z
    .object({
      /** The snapshot. */
      snapshotId: SnapshotId,
      /** Sessions restored, each with the pieces of state bash refused. */
      sessions: z.array(RestoredSession),
      /** How many background processes were started again (processes restart, they do not continue). */
      processesRestarted: z.number().int().nonnegative(),
    })
    .optional(),
  /** What it uses now; null when its driver does not measure usage (absent from older runners). */
  usage: SandboxUsage.nullable().optional(),
})
/** A sandbox. */
export type SandboxInfo = z.infer<typeof SandboxInfo>

/** Body of `POST /v1/sandboxes/:id/keep-alive`. */
export const KeepAliveRequest = z.object({
  /**
   * Hold the sandbox awake (no hibernation, no idle deletion) for this long from now; each call
   * replaces the previous one, and `0` ends it. Longer than the runner's cap (24 hours unless its
   * operator changed it) is lowered to the cap.
   */
  durationMs: z.number().int().nonnegative().max(2_147_483_647),
})
/** Keep-alive options. */
export type KeepAliveRequest = z.infer<typeof KeepAliveRequest>

/** Body of `POST /v1/sandboxes/:id/tokens`. */
export const CreateTokenRequest = z.object({
  /** Lifetime of the token; defaults to 15 minutes, at most 24 hours. */
  ttlMs: z.number().int().positive().optional(),
})
/** Token creation options. */
export type CreateTokenRequest = z.infer<typeof CreateTokenRequest>

/** A sandbox-scoped access token. */
export const AccessToken = z.object({
  /** The bearer secret; usable only for this sandbox. Shown once. */
  token: z.string(),
  /** The sandbox it grants access to. */
  sandboxId: SandboxId,
  /** When it stops working. */
  expiresAt: Timestamp,
})
/** An access token. */
export type AccessToken = z.infer<typeof AccessToken>
