// The private files of one session's shell, in a directory of their own under the temp root:
// the init script, and one command file and one stdin file per slot of the write-ahead window
// (run-window.ts), so lines written ahead of bash never overwrite each other. A slot's command
// file stays open and is rewritten in place for each run that uses the slot; holding it
// replaces the file by rename, so bash sources either the whole command or the whole held
// body. When bash runs as the sandbox user, each file is shared with that user's group,
// read-only.
import {
  chmodSync,
  chownSync,
  closeSync,
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
  readonly #commands = new Map<number, CommandFile>()

  /** Creates the session's directory under `tempRoot`. */
  constructor(tempRoot: string, sandboxGid: number | undefined) {
    this.#sandboxGid = sandboxGid
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
   * write, and a truncate only when the new text is shorter. If the file was unlinked or
   * replaced (a command removed it, or it was held), it is created again by name first, so
   * bash always sources what this run wrote.
   */
  writeCommand(slot: number, text: string): void {
    let file = this.#commands.get(slot)
    if (file === undefined || fstatSync(file.fd).nlink === 0) file = this.#openCommandFile(slot)
    const bytes = Buffer.from(text)
    let at = 0
    while (at < bytes.length) at += writeSync(file.fd, bytes, at, bytes.length - at, at)
    if (bytes.length < file.bytes) ftruncateSync(file.fd, bytes.length)
    file.bytes = bytes.length
  }

  /**
   * Atomically replaces `slot`'s command file by `body` (a new file renamed over it), so a
   * line that has not opened it yet sources `body` and one that has keeps the command.
   */
  holdCommand(slot: number, body: string): void {
    const tmp = this.#writeFile(`held${slot}`, body)
    renameSync(tmp, this.commandPath(slot))
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

  /** Opens (creating or emptying) a slot's command file, which then stays open. */
  #openCommandFile(slot: number): CommandFile {
    const old = this.#commands.get(slot)
    if (old !== undefined) closeSync(old.fd)
    this.#commands.delete(slot)
    const path = this.commandPath(slot)
    rmSync(path, { force: true })
    const file = { fd: openSync(path, 'w', 0o600), bytes: 0 }
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
