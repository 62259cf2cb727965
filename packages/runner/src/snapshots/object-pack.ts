// One pack of the content store: `packs/pack-<24 hex>.pack` holds objects back to back, and
// `packs/pack-<24 hex>.idx` (written once the pack is complete, temp name + rename) says where
// each one is. A pack without its index is a capture that never finished and is swept. An index
// is checked whole before any entry of it is used: an entry past the pack's end, two entries
// that overlap, or one hash listed twice makes the whole pack unreadable (its snapshots then
// restore as damaged), never a read outside the pack.
import { closeSync, constants, fstatSync, openSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import type { ObjectEncoding } from './content-store.ts'

/** Version of the index format, the first field of every index. */
export const PACK_INDEX_VERSION = 1

/** Where one object of a pack is. */
export interface PackEntry {
  /** File name of the pack (`pack-<hex>.pack`), relative to the packs folder. */
  pack: string
  offset: number
  length: number
  encoding: ObjectEncoding
}

/** What an index file holds: `{ version, entries: [[hash, offset, length, "zstd"|"raw"], ...] }`. */
export interface PackIndexFile {
  version: number
  entries: [string, number, number, ObjectEncoding][]
}

/** A pack's name stem: `pack-` and 24 hex digits; anything else in the folder is no pack. */
export const PACK_NAME = /^pack-[0-9a-f]{24}$/
const HASH = /^[0-9a-f]{64}$/

/** Why an index was refused. */
export class PackIndexError extends Error {}

/**
 * Reads and checks the index of pack `stem` in `dir`; throws PackIndexError when the index or
 * the pack is malformed, damaged or inconsistent.
 */
export function loadPackIndex(dir: string, stem: string): Map<string, PackEntry> {
  if (!PACK_NAME.test(stem)) throw new PackIndexError(`${stem} is not a pack name`)
  const pack = `${stem}.pack`
  let packSize: number
  // O_NOFOLLOW: a pack or index that is a symlink is refused, so nothing outside the store is read.
  const fd = openSync(join(dir, pack), constants.O_RDONLY | constants.O_NOFOLLOW)
  try {
    const stat = fstatSync(fd)
    if (!stat.isFile()) throw new PackIndexError(`${pack} is not a file`)
    packSize = stat.size
  } finally {
    closeSync(fd)
  }
  let raw: unknown
  try {
    const idx = openSync(join(dir, `${stem}.idx`), constants.O_RDONLY | constants.O_NOFOLLOW)
    try {
      if (!fstatSync(idx).isFile()) throw new PackIndexError(`the index of ${pack} is not a file`)
      raw = JSON.parse(readFileSync(idx, 'utf8'))
    } finally {
      closeSync(idx)
    }
  } catch {
    throw new PackIndexError(`the index of ${pack} is not JSON`)
  }
  const file = raw as Partial<PackIndexFile> | null
  if (
    file === null ||
    typeof file !== 'object' ||
    file.version !== PACK_INDEX_VERSION ||
    !Array.isArray(file.entries)
  ) {
    throw new PackIndexError(`the index of ${pack} is not version ${PACK_INDEX_VERSION}`)
  }
  const entries = new Map<string, PackEntry>()
  const spans: [number, number][] = []
  for (const item of file.entries as unknown[]) {
    if (!Array.isArray(item) || item.length !== 4)
      throw new PackIndexError(`an entry of ${pack} is malformed`)
    const [hash, offset, length, encoding] = item as unknown[]
    if (typeof hash !== 'string' || !HASH.test(hash))
      throw new PackIndexError(`an entry of ${pack} has a bad hash`)
    if (
      !Number.isSafeInteger(offset) ||
      !Number.isSafeInteger(length) ||
      (offset as number) < 0 ||
      (length as number) < 0
    ) {
      throw new PackIndexError(`entry ${hash} of ${pack} has a bad offset or length`)
    }
    if ((offset as number) + (length as number) > packSize) {
      throw new PackIndexError(`entry ${hash} of ${pack} runs past the pack's end`)
    }
    if (encoding !== 'zstd' && encoding !== 'raw')
      throw new PackIndexError(`entry ${hash} of ${pack} has a bad encoding`)
    if (entries.has(hash)) throw new PackIndexError(`${pack} lists ${hash} twice`)
    entries.set(hash, { pack, offset: offset as number, length: length as number, encoding })
    spans.push([offset as number, length as number])
  }
  spans.sort((a, b) => a[0] - b[0])
  for (let i = 1; i < spans.length; i++) {
    if (spans[i - 1]![0] + spans[i - 1]![1] > spans[i]![0])
      throw new PackIndexError(`two entries of ${pack} overlap`)
  }
  return entries
}
