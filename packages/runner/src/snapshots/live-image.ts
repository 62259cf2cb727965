// The checkpoint image of a live (gVisor) snapshot in the content store: the files `runsc
// checkpoint` wrote (the sandbox's memory, kernel state and processes), each cut into chunks
// stored by their SHA-256 like workspace files. Restore writes them back into a private folder
// for `runsc restore` and checks every chunk's hash as it reads it: an image that changed in the
// store (a damaged disk, someone editing the state dir) is refused, never handed to gVisor.
// The store lives in the runner's state dir, which no sandbox mounts. An image counts against
// `--max-snapshot-bytes` with the workspace: its size is known from the folder before a chunk
// is stored, and the bytes read are counted again while it is stored.
import { createHash } from 'node:crypto'
import { closeSync, openSync, readdirSync, readSync, statSync, writeSync } from 'node:fs'
import { join } from 'node:path'
import { z } from 'zod'
import { RunnerError } from '../runner-error.ts'
import type { ContentStore } from './content-store.ts'
import { CHUNK_BYTES } from './workspace-capture.ts'

/** One file of a checkpoint image. */
const LiveImageFile = z.object({
  /** Its name in the image folder (runsc's own names, such as `checkpoint.img`). */
  name: z.string().regex(/^[A-Za-z0-9._-]{1,128}$/),
  /** Size in bytes. */
  size: z.number().int().nonnegative(),
  /** SHA-256 of each chunk, in order. */
  chunks: z.array(z.string().regex(/^[0-9a-f]{64}$/)),
})

/** The live part of a snapshot: what restores the sandbox with its running processes. */
export const LiveImage = z.object({
  /** How it was taken; only `gvisor-checkpoint` exists. */
  kind: z.literal('gvisor-checkpoint'),
  /** The runsc version line that wrote it; only the same version restores it. */
  runscVersion: z.string().max(256),
  /** The image's files. */
  files: z.array(LiveImageFile).max(64),
})
/** A snapshot's live image. */
export type LiveImage = z.infer<typeof LiveImage>

/** Bytes of the regular files in the checkpoint folder `dir` (what storing it would read). */
export function liveImageBytes(dir: string): number {
  let bytes = 0
  for (const name of readdirSync(dir)) {
    const st = statSync(join(dir, name))
    if (st.isFile()) bytes += st.size
  }
  return bytes
}

/** SNAPSHOT_TOO_LARGE for a live snapshot whose image and workspace together pass `limit`. */
export function liveImageTooLarge(imageBytes: number, workspaceBytes: number, limit: number): RunnerError {
  return new RunnerError(
    'SNAPSHOT_TOO_LARGE',
    `the sandbox's checkpoint image (${imageBytes} bytes: its processes' memory) and its workspace (${workspaceBytes} bytes of files) together pass the snapshot limit of ${limit} bytes; nothing was kept and the sandbox goes on. Stop memory-hungry processes or delete large files, or ask the operator to raise --max-snapshot-bytes.`,
    { details: { limit } },
  )
}

/**
 * Stores the files of the checkpoint folder `dir`; returns the image and the bytes it added.
 * SNAPSHOT_TOO_LARGE once more than `maxBytes` were read (`workspaceBytes` is for the message);
 * chunks stored before that belong to no snapshot, and the caller sweeps them.
 */
export async function storeLiveImage(
  dir: string,
  objects: ContentStore,
  runscVersion: string,
  budget: { maxBytes: number; workspaceBytes: number; limit: number },
): Promise<{ image: LiveImage; addedBytes: number }> {
  const files: LiveImage['files'] = []
  let addedBytes = 0
  let readBytes = 0
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name)
    if (!statSync(path).isFile()) continue
    const fd = openSync(path, 'r')
    const chunks: string[] = []
    let size = 0
    try {
      const buffer = Buffer.allocUnsafe(CHUNK_BYTES)
      for (;;) {
        let filled = 0
        while (filled < CHUNK_BYTES) {
          const n = readSync(fd, buffer, filled, CHUNK_BYTES - filled, null)
          if (n === 0) break
          filled += n
        }
        if (filled === 0) break
        readBytes += filled
        if (readBytes > budget.maxBytes)
          throw liveImageTooLarge(readBytes, budget.workspaceBytes, budget.limit)
        const stored = await objects.put(Buffer.from(buffer.subarray(0, filled)))
        chunks.push(stored.hash)
        addedBytes += stored.addedBytes
        size += filled
        if (filled < CHUNK_BYTES) break
      }
    } finally {
      closeSync(fd)
    }
    files.push({ name, size, chunks })
  }
  return { image: { kind: 'gvisor-checkpoint', runscVersion, files }, addedBytes }
}

/** Writes the image's files into the empty folder `dir`; SNAPSHOT_INCOMPATIBLE when a chunk is missing or altered. */
export async function writeLiveImage(
  image: LiveImage,
  objects: ContentStore,
  dir: string,
  snapshotId: string,
): Promise<void> {
  for (const file of image.files) {
    const fd = openSync(join(dir, file.name), 'wx', 0o600)
    try {
      let size = 0
      for (const hash of file.chunks) {
        let bytes: Buffer
        try {
          bytes = await objects.read(hash)
        } catch {
          throw damaged(snapshotId, `a chunk of ${file.name} is missing`)
        }
        if (createHash('sha256').update(bytes).digest('hex') !== hash)
          throw damaged(snapshotId, `a chunk of ${file.name} does not match its hash`)
        let at = 0
        while (at < bytes.length) at += writeSync(fd, bytes, at, bytes.length - at)
        size += bytes.length
      }
      if (size !== file.size) throw damaged(snapshotId, `${file.name} has ${size} bytes, not ${file.size}`)
    } finally {
      closeSync(fd)
    }
  }
}

function damaged(snapshotId: string, why: string): RunnerError {
  return new RunnerError(
    'SNAPSHOT_INCOMPATIBLE',
    `the checkpoint image of snapshot ${snapshotId} is damaged (${why}); it was not restored. Delete the snapshot and take a new one.`,
  )
}
