// The private files of one session's shell, in a directory of their own under the temp root:
// the init script, and one command file and one stdin file per slot of the write-ahead window
// (run-window.ts), so lines written ahead of bash never overwrite each other. A slot's command
// file stays open and is rewritten in place for each run that uses the slot; holding it
// replaces the file by rename, so bash sources either the whole command or the whole held
// body. When bash runs as the sandbox user, each file is shared with that user's group,
// read-only.
//
// Whether a slot's open file is still the one bash sources by name: holding it (rename) is
// this file's own doing, so it drops the slot's descriptor then. Anything else that could
// unlink or replace it needs write access to the directory: when bash runs as the sandbox user,
// nothing the sandbox runs has it (the directory is the agent's, 0750, the group read-only), so
// a write needs no check; when bash runs as the agent's own user, a command may remove or
// replace its file, so each write first checks that the open file is still linked. A file is
// (re)created by name only after removing what is there and with O_EXCL | O_NOFOLLOW, so a
// symlink or file planted in between is never written through.
import {
  chmodSync,
  chownSync,
  closeSync,
  constants,
  fstatSync,
  ftruncateSync,
  mkdtempSync,
  openSync,
  renameSync,
  rmSync,
  writeFileSync,
  writeSync,
} from 'node:fs'
import { join } from 'node:path'

/** Open flags of a new command file: write-only, created here, never through a symlink. */
const CREATE_NEW = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW

/** Times a command file's creation is tried when something else keeps taking its name. */
const OPEN_ATTEMPTS = 5

/** One slot's open command file. */
interface CommandFile {
  fd: number
  bytes: number
}

/** The files one session's bash reads its init script, commands and stdin from. */
export class SessionFiles {
  /** Every command file's path starts with this. */
  readonly commandPrefix: string
  /** The session's private directory. */
  readonly dir: string
  readonly #sandboxGid: number | undefined
  /** Whether the shell runs as the agent's own user, so its commands can unlink these files. */
  readonly #shellCanUnlink: boolean
  readonly #commands = new Map<number, CommandFile>()

  /** Creates the session's directory under `tempRoot`. */
  constructor(tempRoot: string, sandboxGid: number | undefined) {
    this.#sandboxGid = sandboxGid
    this.#shellCanUnlink = sandboxGid === undefined
    this.dir = mkdtempSync(join(tempRoot, 'conch-'))
    this.#share(this.dir, 0o750)
    this.commandPrefix = join(this.dir, 'cmd')
  }

  /** The command file of `slot`. */
  commandPath(slot: number): string {
    return `${this.commandPrefix}${slot}`
  }

  /** Writes the init script and returns its path. */
  writeInit(script: string): string {
    return this.#writeFile('init', script)
  }

  /** Writes the stdin of the run in `slot` and returns its path. */
  writeStdin(slot: number, bytes: Uint8Array): string {
    return this.#writeFile(`stdin${slot}`, bytes)
  }

  /**
   * Replaces the contents of `slot`'s command file through its open descriptor: a positioned
   * write, and a truncate only when the new text is shorter. If the file was held, or (when the
   * shell runs as the agent's user) a command unlinked it, it is created again by name first,
   * so bash always sources what this run wrote.
   */
  writeCommand(slot: number, text: string): void {
    let file = this.#commands.get(slot)
    if (file === undefined || (this.#shellCanUnlink && fstatSync(file.fd).nlink === 0))
      file = this.#openCommandFile(slot)
    const total = Buffer.byteLength(text)
    try {
      // The string goes to the kernel without a Buffer of our own; a short write (never seen on
      // a tmpfs for a small file) finishes from a Buffer.
      let length = writeSync(file.fd, text, 0, 'utf8')
      if (length < total) {
        const bytes = Buffer.from(text)
        while (length < total) length += writeSync(file.fd, bytes, length, total - length, length)
      }
      if (total < file.bytes) ftruncateSync(file.fd, total)
    } catch (error) {
      // A write that failed part way (the directory's filesystem full) left the file holding
      // some of this text over the last: the slot's next write starts from a new file.
      this.#forgetCommandFile(slot)
      throw error
    }
    file.bytes = total
  }

  /**
   * Atomically replaces `slot`'s command file by `body` (a new file renamed over it), so a
   * line that has not opened it yet sources `body` and one that has keeps the command.
   */
  holdCommand(slot: number, body: string): void {
    const tmp = this.#writeFile(`held${slot}`, body)
    renameSync(tmp, this.commandPath(slot))
    // The open file is no longer the one bash finds by name: the next write creates it again.
    this.#forgetCommandFile(slot)
  }

  /** Closes the command files and removes the directory with everything in it. */
  remove(): void {
    for (const file of this.#commands.values()) closeSync(file.fd)
    this.#commands.clear()
    rmSync(this.dir, { recursive: true, force: true })
  }

  #writeFile(name: string, data: string | Uint8Array): string {
    const path = join(this.dir, name)
    writeFileSync(path, data, { mode: 0o600 })
    this.#share(path, 0o640)
    return path
  }

  /** Closes a slot's open command file, if any. */
  #forgetCommandFile(slot: number): void {
    const old = this.#commands.get(slot)
    if (old !== undefined) closeSync(old.fd)
    this.#commands.delete(slot)
  }

  /**
   * Creates a slot's command file anew, which then stays open: whatever is at its name (the
   * held body, or what a command put there) is removed, and the open refuses to follow a
   * symlink or reuse a file that appears in between.
   */
  #openCommandFile(slot: number): CommandFile {
    this.#forgetCommandFile(slot)
    const path = this.commandPath(slot)
    let fd = -1
    for (let attempt = 1; fd < 0; attempt++) {
      rmSync(path, { force: true })
      try {
        fd = openSync(path, CREATE_NEW, 0o600)
      } catch (error) {
        // Something took the name between the removal and the open: remove it again.
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST' || attempt === OPEN_ATTEMPTS) throw error
      }
    }
    const file = { fd, bytes: 0 }
    this.#commands.set(slot, file)
    this.#share(path, 0o640)
    return file
  }

  /** Gives the sandbox user's group read access to one of the files, when bash runs as it. */
  #share(path: string, mode: number): void {
    const gid = this.#sandboxGid
    if (gid === undefined) return
    chownSync(path, process.getuid?.() ?? 0, gid)
    chmodSync(path, mode)
  }
}
