import { z } from 'zod'
import { Timestamp } from './primitives.ts'
import { REFINEMENTS } from './refinements.ts'

/** A path inside the sandbox: absolute under `/workspace`, or relative to it. */
export const SandboxPath = z
  .string()
  .min(1)
  .max(4096)
  .refine(REFINEMENTS.pathWithoutNul.test, REFINEMENTS.pathWithoutNul.message)
/** A sandbox path. */
export type SandboxPath = z.infer<typeof SandboxPath>

/** What a directory entry or stat reports. */
export const FileInfo = z.object({
  /** Absolute sandbox path (`/workspace/...`). */
  path: z.string(),
  /** Last path component. */
  name: z.string(),
  /** Entry type; symlinks are reported, never followed out of the sandbox. */
  type: z.enum(['file', 'directory', 'symlink', 'other']),
  /** Size in bytes. */
  size: z.number().int().nonnegative(),
  /** Permission bits. */
  mode: z.number().int(),
  /** Last modification time. */
  mtimeMs: Timestamp,
})
/** File metadata. */
export type FileInfo = z.infer<typeof FileInfo>
