// A writer for the cpio "newc" format, the one the Linux kernel unpacks as an initramfs. Each
// entry is a 110-byte ASCII header (magic and thirteen 8-digit hex fields), the NUL-terminated
// name padded to 4 bytes, then the data padded to 4 bytes; a `TRAILER!!!` entry ends the
// archive. The kernel creates no missing parent folders, so callers add folders first.
import { closeSync, openSync, writeSync } from 'node:fs'

/** The newc magic. */
const MAGIC = '070701'

/** File type bits of `mode`. */
const S_IFDIR = 0o040000
const S_IFREG = 0o100000
const S_IFLNK = 0o120000

/** One archive entry; `name` is relative, without a leading slash. */
export type NewcEntry =
  | { kind: 'dir'; name: string; mode: number }
  | { kind: 'file'; name: string; mode: number; data: Uint8Array }
  | { kind: 'symlink'; name: string; target: string }

function hex8(value: number): string {
  return value.toString(16).padStart(8, '0')
}

function padding(length: number): Buffer {
  return Buffer.alloc((4 - (length % 4)) % 4)
}

/** Writes newc archives entry by entry to a file. */
export class NewcWriter {
  readonly #fd: number
  #ino = 1

  /** Opens (truncating) the archive file. */
  constructor(path: string) {
    this.#fd = openSync(path, 'w')
  }

  /** Appends one entry. */
  add(entry: NewcEntry): void {
    const data =
      entry.kind === 'file'
        ? entry.data
        : entry.kind === 'symlink'
          ? Buffer.from(entry.target)
          : Buffer.alloc(0)
    const mode =
      entry.kind === 'dir'
        ? S_IFDIR | entry.mode
        : entry.kind === 'file'
          ? S_IFREG | entry.mode
          : S_IFLNK | 0o777
    this.#record(entry.name, mode, entry.kind === 'dir' ? 2 : 1, data)
  }

  /** Writes the trailer and closes the file. */
  close(): void {
    this.#record('TRAILER!!!', 0, 1, Buffer.alloc(0))
    closeSync(this.#fd)
  }

  #record(name: string, mode: number, nlink: number, data: Uint8Array): void {
    const nameBytes = Buffer.from(`${name}\0`)
    const fields = [
      this.#ino++, // ino
      mode,
      0, // uid
      0, // gid
      nlink,
      0, // mtime
      data.length,
      0, // devmajor
      0, // devminor
      0, // rdevmajor
      0, // rdevminor
      nameBytes.length,
      0, // check
    ]
    const header = Buffer.from(MAGIC + fields.map(hex8).join(''), 'ascii')
    writeSync(this.#fd, header)
    writeSync(this.#fd, nameBytes)
    writeSync(this.#fd, padding(header.length + nameBytes.length))
    if (data.length > 0) writeSync(this.#fd, data)
    writeSync(this.#fd, padding(data.length))
  }
}
