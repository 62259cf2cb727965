// The content-addressed store behind every snapshot's workspace: one object per distinct file
// content, named by its SHA-256, so a file that two snapshots (or two paths) share is stored
// once and a second snapshot of a large workspace stores only what changed.
//
// Model (store format 2, see docs/SNAPSHOTS.md): new objects are appended to a pack,
// `packs/pack-<hex>.pack`, one per snapshot (a new one past PACK_CAP_BYTES), and `seal()` writes
// the pack's index beside it before the snapshot store writes (and fsyncs) the manifest; a
// thousand files cost one create, not a thousand. Each object is zstd-compressed, or kept as is
// when compression would not make it smaller (a large chunk is judged by compressing its first
// 64 KiB). Format 1 stores kept one file per object, `<first two hex digits>/<hash>.zst|.raw`;
// those are still read (and a raw one cloned with a reflink), never written. Every read checks
// the object's SHA-256, so a damaged or edited pack byte fails as SNAPSHOT_INCOMPATIBLE.
// Objects are not fsynced (a thousand fsyncs would cost more than the whole snapshot); the
// manifest is, last. Which objects are still needed is decided by the snapshot store (mark
// and sweep over its manifests): a pack goes when no kept object is in it.
import { createHash, randomBytes, webcrypto } from 'node:crypto'
import {
  closeSync,
  constants,
  mkdirSync,
  openSync,
  read,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
  write,
  writeFileSync,
} from 'node:fs'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { constants as zlibConstants, zstdCompress, zstdDecompress } from 'node:zlib'
import { RunnerError } from '../runner-error.ts'
import {
  loadPackIndex,
  PACK_INDEX_VERSION,
  PACK_NAME,
  type PackEntry,
  type PackIndexFile,
} from './object-pack.ts'

const compress = promisify(zstdCompress)
const decompress = promisify(zstdDecompress)
const writeAt = promisify(write)
const readAt = promisify(read)

/** A pack being written is sealed and a new one begun once it holds this many bytes. */
export const PACK_CAP_BYTES = 256 * 1024 * 1024

/** A pack being written: its file, how far it is filled, and the entries its index will hold. */
interface OpenPack {
  stem: string
  fd: number
  size: number
  entries: [string, number, number, ObjectEncoding][]
}

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
  readonly #packs: string
  /** Where each packed object is (sealed packs and the one being written). */
  readonly #index = new Map<string, PackEntry>()
  /** Sealed packs: stem -> the hashes in it and its size. */
  readonly #sealed = new Map<string, { hashes: string[]; bytes: number }>()
  /** Puts under way, by hash, so one content stored twice at once is appended once. */
  readonly #inflight = new Map<string, Promise<StoredObject>>()
  #open: OpenPack | null = null

  /** Uses (and creates) `dir`; loads every pack index, and drops packs whose index is missing or refused. */
  constructor(dir: string) {
    this.#dir = dir
    this.#packs = join(dir, 'packs')
    mkdirSync(this.#packs, { recursive: true, mode: 0o700 })
    for (const name of readdirSync(this.#packs)) {
      const stem = name.replace(/\.(pack|idx)$/, '')
      if (!name.endsWith('.pack') || !PACK_NAME.test(stem)) continue
      try {
        const entries = loadPackIndex(this.#packs, stem)
        for (const [hash, entry] of entries) if (!this.#index.has(hash)) this.#index.set(hash, entry)
        this.#sealed.set(stem, { hashes: [...entries.keys()], bytes: statSync(join(this.#packs, name)).size })
      } catch {
        // An unfinished pack (no index) or a refused one: its objects are not in the store,
        // so a snapshot that names them restores as damaged. The sweep removes it.
      }
    }
  }

  /** Stores `content` unless an object with its hash is there already. */
  async put(content: Buffer): Promise<StoredObject> {
    const hash = await sha256(content)
    const existing = this.encodingOf(hash)
    if (existing !== null) return { hash, encoding: existing, addedBytes: 0 }
    const running = this.#inflight.get(hash)
    if (running) return { ...(await running), addedBytes: 0 }
    const task = this.#append(hash, content)
    this.#inflight.set(hash, task)
    try {
      return await task
    } finally {
      this.#inflight.delete(hash)
    }
  }

  async #append(hash: string, content: Buffer): Promise<StoredObject> {
    const packed =
      content.length < 64 || (await incompressible(content))
        ? content
        : await compress(content, { params: { [zlibConstants.ZSTD_c_compressionLevel]: 1 } })
    const encoding: ObjectEncoding = packed.length < content.length ? 'zstd' : 'raw'
    const bytes = encoding === 'zstd' ? packed : content
    if (this.#open !== null && this.#open.size >= PACK_CAP_BYTES) this.seal()
    this.#open ??= this.#begin()
    const pack = this.#open
    // The span is reserved before the write, so puts running at once never share bytes.
    const offset = pack.size
    pack.size += bytes.length
    await writeAt(pack.fd, bytes, 0, bytes.length, offset)
    pack.entries.push([hash, offset, bytes.length, encoding])
    this.#index.set(hash, { pack: `${pack.stem}.pack`, offset, length: bytes.length, encoding })
    return { hash, encoding, addedBytes: bytes.length }
  }

  #begin(): OpenPack {
    const stem = `pack-${randomBytes(12).toString('hex')}`
    const fd = openSync(
      join(this.#packs, `${stem}.pack`),
      constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL,
      0o600,
    )
    return { stem, fd, size: 0, entries: [] }
  }

  /**
   * Writes the index of the pack being written (temp name + rename) and closes it. The snapshot
   * store calls it after a capture and before the manifest; call it when no put is under way.
   */
  seal(): void {
    const pack = this.#open
    if (pack === null) return
    this.#open = null
    closeSync(pack.fd)
    const file: PackIndexFile = { version: PACK_INDEX_VERSION, entries: pack.entries }
    const temp = join(this.#packs, `.${pack.stem}.idx.tmp`)
    writeFileSync(temp, JSON.stringify(file), { mode: 0o600 })
    renameSync(temp, join(this.#packs, `${pack.stem}.idx`))
    this.#sealed.set(pack.stem, { hashes: pack.entries.map((e) => e[0]), bytes: pack.size })
  }

  /** How the object `hash` is kept, or null when the store does not hold it. */
  encodingOf(hash: string): ObjectEncoding | null {
    if (!HASH.test(hash)) return null
    const packed = this.#index.get(hash)
    if (packed) return packed.encoding
    for (const encoding of ['zstd', 'raw'] as const) {
      try {
        if (statSync(this.#loosePath(hash, encoding)).isFile()) return encoding
      } catch {
        // not kept this way
      }
    }
    return null
  }

  /** The path of a loose raw object (for cloning it), or null when it is packed, compressed or missing. */
  rawPath(hash: string): string | null {
    if (this.#index.has(hash)) return null
    return this.encodingOf(hash) === 'raw' ? this.#loosePath(hash, 'raw') : null
  }

  /** The content of object `hash`, its SHA-256 checked; SNAPSHOT_INCOMPATIBLE when it is missing or damaged. */
  async read(hash: string): Promise<Buffer> {
    const encoding = this.encodingOf(hash)
    if (encoding === null) throw damaged(`object ${hash.slice(0, 12)} is missing from the store`)
    const packed = this.#index.get(hash)
    let bytes: Buffer
    if (packed) {
      bytes = Buffer.alloc(packed.length)
      const fd = openSync(join(this.#packs, packed.pack), constants.O_RDONLY | constants.O_NOFOLLOW)
      try {
        const { bytesRead } = await readAt(fd, bytes, 0, packed.length, packed.offset)
        if (bytesRead !== packed.length) throw damaged(`object ${hash.slice(0, 12)} is cut short in its pack`)
      } finally {
        closeSync(fd)
      }
    } else {
      bytes = await readFile(this.#loosePath(hash, encoding))
    }
    let content: Buffer
    try {
      content = encoding === 'zstd' ? await decompress(bytes) : bytes
    } catch {
      throw damaged(`object ${hash.slice(0, 12)} does not decompress`)
    }
    if ((await sha256(content)) !== hash) throw damaged(`object ${hash.slice(0, 12)} does not match its hash`)
    return content
  }

  /**
   * Deletes every loose object whose hash is not in `keep`, every pack none of whose objects is
   * in `keep` (a pack partly kept stays whole), unfinished packs and stale temp files; seals the
   * pack being written first. Returns the bytes freed.
   */
  sweep(keep: ReadonlySet<string>): number {
    this.seal()
    let freed = 0
    for (const [stem, pack] of this.#sealed) {
      if (pack.hashes.some((hash) => keep.has(hash))) continue
      freed += pack.bytes
      for (const hash of pack.hashes)
        if (this.#index.get(hash)?.pack === `${stem}.pack`) this.#index.delete(hash)
      this.#sealed.delete(stem)
      rmSync(join(this.#packs, `${stem}.idx`), { force: true })
      rmSync(join(this.#packs, `${stem}.pack`), { force: true })
    }
    for (const name of readdirSync(this.#packs)) {
      const stem = name.replace(/\.(pack|idx)$/, '')
      if (this.#sealed.has(stem)) continue
      const path = join(this.#packs, name)
      freed += statSync(path).size
      rmSync(path, { force: true })
    }
    for (const prefix of readdirSync(this.#dir)) {
      if (!/^[0-9a-f]{2}$/.test(prefix)) continue
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

  #loosePath(hash: string, encoding: ObjectEncoding): string {
    return join(this.#dir, hash.slice(0, 2), `${hash}.${encoding === 'zstd' ? 'zst' : 'raw'}`)
  }
}

function damaged(what: string): RunnerError {
  return new RunnerError(
    'SNAPSHOT_INCOMPATIBLE',
    `the snapshot is damaged (${what}); it was not restored. Delete the snapshot and take a new one.`,
  )
}
