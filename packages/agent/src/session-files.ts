// The private files of one session's shell, in a directory of their own under the temp root:
// the init script, the command file each run's line sources, and a run's stdin. The command
// file stays open for the session's life and is rewritten in place for every run. When bash
// runs as the sandbox user, each file is shared with that user's group, read-only.
import {
  chmodSync,
  chownSync,
  closeSync,
  fstatSync,
  ftruncateSync,
  mkdtempSync,
  openSync,
  rmSync,
  writeFileSync,
  writeSync,
} from 'node:fs'
import { join } from 'node:path'

/** The files one session's bash reads its init script, commands and stdin from. */
export class SessionFiles {
  /** The command file that every run's line sources. */
  readonly commandPath: string
  readonly #dir: string
  readonly #sandboxGid: number | undefined
  #cmdFd = -1
  #cmdBytes = 0

  /** Creates the session's directory and its empty command file under `tempRoot`. */
  constructor(tempRoot: string, sandboxGid: number | undefined) {
    this.#sandboxGid = sandboxGid
    this.#dir = mkdtempSync(join(tempRoot, 'conch-'))
    this.#share(this.#dir, 0o750)
    this.commandPath = join(this.#dir, 'cmd')
    this.#openCommandFile()
  }

  /** Writes the init script and returns its path. */
  writeInit(script: string): string {
    return this.#writeFile('init', script)
  }

  /** Writes a run's stdin and returns its path. */
  writeStdin(bytes: Uint8Array): string {
    return this.#writeFile('stdin', bytes)
  }

  /**
   * Replaces the command file's contents through the open descriptor: a positioned write, and
   * a truncate only when the new text is shorter. If a command unlinked the file, it is
   * created again by name first, so bash always sources what this run wrote.
   */
  writeCommand(text: string): void {
    if (fstatSync(this.#cmdFd).nlink === 0) this.#openCommandFile()
    const bytes = Buffer.from(text)
    let at = 0
    while (at < bytes.length) at += writeSync(this.#cmdFd, bytes, at, bytes.length - at, at)
    if (bytes.length < this.#cmdBytes) ftruncateSync(this.#cmdFd, bytes.length)
    this.#cmdBytes = bytes.length
  }

  /** Closes the command file and removes the directory with everything in it. */
  remove(): void {
    if (this.#cmdFd >= 0) closeSync(this.#cmdFd)
    this.#cmdFd = -1
    rmSync(this.#dir, { recursive: true, force: true })
  }

  #writeFile(name: string, data: string | Uint8Array): string {
    const path = join(this.#dir, name)
    writeFileSync(path, data, { mode: 0o600 })
    this.#share(path, 0o640)
    return path
  }

  /** Opens (creating or emptying) the command file, which stays open for the session's life. */
  #openCommandFile(): void {
    if (this.#cmdFd >= 0) closeSync(this.#cmdFd)
    this.#cmdFd = -1
    this.#cmdFd = openSync(this.commandPath, 'w', 0o600)
    this.#share(this.commandPath, 0o640)
    this.#cmdBytes = 0
  }

  /** Gives the sandbox user's group read access to one of the files, when bash runs as it. */
  #share(path: string, mode: number): void {
    const gid = this.#sandboxGid
    if (gid === undefined) return
    chownSync(path, process.getuid?.() ?? 0, gid)
    chmodSync(path, mode)
  }
}
