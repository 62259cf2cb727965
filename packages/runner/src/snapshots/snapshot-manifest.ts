// The stored form of one snapshot: `snapshots/<id>.json` in the runner's state dir. It names
// the workspace's entries (each file as the content-store objects of its chunks), every
// session's shell state as the agent captured it, and the sandbox's config. The runner wrote
// it, but names, link targets and shell state inside it came from sandbox code: restore
// re-validates every name and never follows a link it wrote. The format is versioned
// (`formatVersion`); docs/SNAPSHOTS.md describes it.
import {
  BoundedEnv,
  SandboxLimits,
  SandboxShellState,
  SNAPSHOT_FORMAT_VERSION,
  SnapshotId,
  TimeoutMs,
  Timestamp,
} from '@conch/protocol'
import { z } from 'zod'
import { LiveImage } from './live-image.ts'

/** A path inside the workspace: its name components' raw bytes, base64 each. */
export const EntryPath = z.array(z.string().max(2048)).min(1).max(256)

const common = {
  /** Path relative to the workspace root. */
  path: EntryPath,
  /** Permission bits (setuid and setgid are never kept). */
  mode: z.number().int().min(0).max(0o1777),
  /** Modification time, ms since the epoch. */
  mtimeMs: z.number(),
}

/** One workspace entry, parents before children. */
export const WorkspaceEntry = z.discriminatedUnion('type', [
  z.object({ type: z.literal('dir'), ...common }),
  z.object({
    type: z.literal('file'),
    ...common,
    /** Size in bytes. */
    size: z.number().int().nonnegative(),
    /** SHA-256 of each chunk (`CHUNK_BYTES` each, the last shorter), in order. */
    chunks: z.array(z.string().regex(/^[0-9a-f]{64}$/)),
  }),
  z.object({
    type: z.literal('symlink'),
    ...common,
    /** The link's target bytes, base64; restored as written, never followed. */
    target: z.string().max(8192),
  }),
])
/** A workspace entry. */
export type WorkspaceEntry = z.infer<typeof WorkspaceEntry>

/** Something in the workspace a snapshot leaves out, and why. */
export const SkippedEntry = z.object({
  /** Its path, as UTF-8 text (lossy for names that are not). */
  path: z.string(),
  /** Why: `fifo`, `socket`, `device`, or `changed while read`. */
  reason: z.string(),
})

/** The largest idle time a manifest carries (the protocol's `TimeoutMs` bound). */
const MAX_LIFETIME_MS = 2_147_483_647

/**
 * An idle setting in a manifest: ms, or null for never. The manifest is read back from disk,
 * so a value no runner writes is not trusted: one over the largest timeout is lowered to it,
 * and anything else that is not a positive integer (negative, zero, a fraction, a string) is
 * dropped, so the fork takes the runner's default as if the snapshot predated the field.
 */
const ManifestLifetime = z
  .unknown()
  .transform((value): number | null | undefined => {
    if (value === null) return null
    if (typeof value !== 'number' || !Number.isInteger(value) || value <= 0) return undefined
    return Math.min(value, MAX_LIFETIME_MS)
  })
  .optional()

/** The sandbox settings a fork starts from (its create request may override each). */
export const SnapshotSandboxConfig = z.object({
  /** Driver of the sandbox the snapshot was taken of. */
  driver: z.string(),
  /** Its limits. */
  limits: SandboxLimits,
  /** Its base environment. */
  env: BoundedEnv,
  /** Its labels. */
  metadata: z.record(z.string(), z.string()),
  /** Its idle timeout. */
  idleTimeoutMs: TimeoutMs.nullable(),
  /** Its hibernation time (absent in snapshots of runners before the field: the runner's default). */
  hibernateAfterMs: ManifestLifetime,
  /** Its sessions' idle timeout (absent in snapshots of runners before the field: the runner's default). */
  sessionIdleTimeoutMs: ManifestLifetime,
})
/** A snapshot's sandbox settings. */
export type SnapshotSandboxConfig = z.infer<typeof SnapshotSandboxConfig>

/** One stored snapshot. */
export const SnapshotManifest = z.object({
  /** The format's version. */
  formatVersion: z.number().int(),
  /** Snapshot id. */
  id: SnapshotId,
  /** Its name, if one was given. */
  name: z.string().max(256).nullable(),
  /** The sandbox it was taken of. */
  sandboxId: z.string(),
  /** When. */
  createdAt: Timestamp,
  /** The sandbox's settings. */
  sandbox: SnapshotSandboxConfig,
  /** Every open session's shell state and the background processes. */
  shells: SandboxShellState,
  /** The workspace: entries, parents first. */
  workspace: z.object({
    entries: z.array(WorkspaceEntry),
    /** Bytes of file content before compression. */
    bytes: z.number().int().nonnegative(),
    /** What was left out. */
    skipped: z.array(SkippedEntry),
  }),
  /** Bytes this snapshot added to the content store. */
  storedBytes: z.number().int().nonnegative(),
  /**
   * A live snapshot's checkpoint image (gVisor): restores the sandbox with its processes
   * running. Absent in a shell-state snapshot; a runner or driver that cannot use it restores
   * from `shells` and `workspace` as from any snapshot.
   */
  live: LiveImage.optional(),
})
/** A stored snapshot. */
export type SnapshotManifest = z.infer<typeof SnapshotManifest>

/** Whether a manifest's format is one this runner reads. */
export function isReadableFormat(version: number): boolean {
  return version === SNAPSHOT_FORMAT_VERSION
}
