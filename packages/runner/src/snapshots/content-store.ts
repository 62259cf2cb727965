// The content-addressed store behind every snapshot's workspace: one object per distinct file
// content, named by its SHA-256, so a file that two snapshots (or two paths) share is stored
// once and a second snapshot of a large workspace stores only what changed.
//
// Model: `objects/<first two hex digits>/<hash>.zst` holds zstd-compressed content, or
// `<hash>.raw` the content as is when compression would not make it smaller (a large chunk is
// judged by compressing its first 64 KiB; restore can then clone it with a reflink where the
// filesystem has them). Objects are written to a temp name and renamed, so a crash leaves no
// half object under a real name. Objects are not fsynced one by one (a thousand fsyncs would
// cost more than the whole snapshot); the manifest is, last, and a restore that meets an
// object a power loss took reports the snapshot as damaged. Which objects are
// still needed is decided by the snapshot store (mark and sweep over its manifests).
import { createHash, randomBytes, webcrypto } from 'node:crypto'
import { constants, mkdirSync, readdirSync, rmSync, statSync } from 'node:fs'
import { open, readFile, rename } from 'node:fs/promises'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { constants as zlibConstants, zstdCompress, zstdDecompress } from 'node:zlib'

const compress = promisify(zstdCompress)
const decompress = promisify(zstdDecompress)

/** How an object's bytes are kept. */
export type ObjectEncoding = 'zstd' | 'raw'

/** A stored object: its content hash, how it is kept, and what it cost if it is new. */
export interface StoredObject {
  /** SHA-256 of the content, hex. */
  hash: string
  /** How the bytes are kept. */
  encoding: ObjectEncoding
  /** Bytes it added to the store (0 when the content was there already). */
  addedBytes: number
}

const HASH = /^[0-9a-f]{64}$/

/** Chunks at least this large are hashed on the thread pool (WebCrypto), beside other work. */
const OFF_THREAD_HASH_BYTES = 64 * 1024

/** SHA-256 of `content`, hex: a large chunk off the main thread, where the walk and other chunks' hashing go on. */
async function sha256(content: Buffer): Promise<string> {
  if (content.length < OFF_THREAD_HASH_BYTES) return createHash('sha256').update(content).digest('hex')
  return Buffer.from(await webcrypto.subtle.digest('SHA-256', content)).toString('hex')
}

/** Chunks at least this large are judged by a sample before the whole is compressed. */
const SAMPLE_FROM_BYTES = 256 * 1024
/** Bytes of a chunk's start compressed as its sample. */
const SAMPLE_BYTES = 64 * 1024

/**
 * Whether a large chunk would not shrink: its first `SAMPLE_BYTES` do not compress by 3%
 * (random bytes, archives, media). Such a chunk is kept raw without compressing it whole,
 * which for a workspace of compressed files was the largest part of a first snapshot.
 */
async function incompressible(content: Buffer): Promise<boolean> {
  if (content.length < SAMPLE_FROM_BYTES) return false
  const sample = content.subarray(0, SAMPLE_BYTES)
  const packed = await compress(sample, { params: { [zlibConstants.ZSTD_c_compressionLevel]: 1 } })
  return packed.length > sample.length * 0.97
}

/** The objects folder of one snapshot store. */
export class ContentStore {
  readonly #dir: string
  /** Prefix folders known to exist. */
  readonly #prefixes = new Set<string>()

  /** Uses (and creates) `dir`. */
  constructor(dir: string) {
    this.#dir = dir
    mkdirSync(dir, { recursive: true, mode: 0o700 })
  }

  /** Stores `content` unless an object with its hash is there already. */
  async put(content: Buffer): Promise<StoredObject> {
    const hash = await sha256(content)
    const existing = this.encodingOf(hash)
    if (existing !== null) return { hash, encoding: existing, addedBytes: 0 }
    const packed =
      content.length < 64 || (await incompressible(content))
        ? content
        : await compress(content, { params: { [zlibConstants.ZSTD_c_compressionLevel]: 1 } })
    const encoding: ObjectEncoding = packed.length < content.length ? 'zstd' : 'raw'
    const bytes = encoding === 'zstd' ? packed : content
    const dir = join(this.#dir, hash.slice(0, 2))
    if (!this.#prefixes.has(dir)) {
      mkdirSync(dir, { recursive: true, mode: 0o700 })
      this.#prefixes.add(dir)
    }
    // Written off the main thread: a thousand creates cost more than the hashing beside them.
    const temp = join(dir, `.${randomBytes(6).toString('hex')}.tmp`)
    const handle = await open(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600)
    try {
      await handle.writeFile(bytes)
    } finally {
      await handle.close()
    }
    await rename(temp, this.#path(hash, encoding))
    return { hash, encoding, addedBytes: bytes.length }
  }

  /** How the object `hash` is kept, or null when the store does not hold it. */
  encodingOf(hash: string): ObjectEncoding | null {
    if (!HASH.test(hash)) return null
    for (const encoding of ['zstd', 'raw'] as const) {
      try {
        if (statSync(this.#path(hash, encoding)).isFile()) return encoding
      } catch {
        // not kept this way
      }
    }
    return null
  }

  /** The path of a raw object (for cloning it), or null when it is compressed or missing. */
  rawPath(hash: string): string | null {
    return this.encodingOf(hash) === 'raw' ? this.#path(hash, 'raw') : null
  }

  /** The content of object `hash`; throws when it is missing. */
  async read(hash: string): Promise<Buffer> {
    const encoding = this.encodingOf(hash)
    if (encoding === null) throw new Error(`snapshot object ${hash} is missing from the store`)
    const bytes = await readFile(this.#path(hash, encoding))
    return encoding === 'zstd' ? decompress(bytes) : bytes
  }

  /** Deletes every object whose hash is not in `keep`, and stale temp files; returns the bytes freed. */
  sweep(keep: ReadonlySet<string>): number {
    let freed = 0
    for (const prefix of readdirSync(this.#dir)) {
      const dir = join(this.#dir, prefix)
      for (const name of readdirSync(dir)) {
        const hash = name.replace(/\.(zst|raw)$/, '')
        if (keep.has(hash)) continue
        const path = join(dir, name)
        freed += statSync(path).size
        rmSync(path, { force: true })
      }
    }
    return freed
  }

  #path(hash: string, encoding: ObjectEncoding): string {
    return join(this.#dir, hash.slice(0, 2), `${hash}.${encoding === 'zstd' ? 'zst' : 'raw'}`)
  }
}
