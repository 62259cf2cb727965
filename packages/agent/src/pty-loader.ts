// Finds node-pty, the agent's one native dependency. The agent runs as a single bundled file
// with no node_modules (see the runner's agent-bundle.ts), so node-pty is not bundled: drivers
// place its runtime files (its JavaScript, package.json and the compiled `pty.node`) in a
// `node-pty` folder beside the bundle (`/opt/conch/node-pty` in a sandbox; `dist/node-pty` in
// the published runner). Run from source, the agent's own dependency is used. It is loaded on
// the first terminal, so an agent without it still serves shells, and a terminal then fails
// with a message that says what is missing.
import { existsSync } from 'node:fs'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'
import { AgentError } from './agent-error.ts'

/** The part of node-pty's process handle the agent uses. */
export interface PtyProcess {
  /** Program pid (a session leader: its process group is its pid). */
  readonly pid: number
  /** Path of the pty's program side (`/dev/pts/N`). */
  readonly ptsName: string
  /** The master's fd, which the agent writes input to (see pty-input.ts). */
  readonly fd: number
  /**
   * node-pty's `close`: the master's fd was closed (its read hit EIO), emitted before any timer
   * or I/O callback runs again, so nothing is written to a number the process may reuse.
   */
  on(event: 'close', listener: () => void): void
  /** Output; a Buffer because the agent opens ptys with `encoding: null`. */
  onData(listener: (data: Buffer | string) => void): unknown
  /** The program ended. */
  onExit(listener: (e: { exitCode: number; signal?: number }) => void): unknown
  /** New size (TIOCSWINSZ; the program gets SIGWINCH). */
  resize(cols: number, rows: number): void
  /** Sends a signal to the program. */
  kill(signal?: string): void
  /** Stops reading output (the pty's buffer then blocks the program). */
  pause(): void
  /** Reads output again. */
  resume(): void
}

/** Options node-pty's spawn takes. */
export interface PtySpawnOptions {
  /** TERM. */
  name: string
  /** Columns. */
  cols: number
  /** Rows. */
  rows: number
  /** Working directory. */
  cwd: string
  /** The whole environment. */
  env: Record<string, string>
  /** Bytes in and out. */
  encoding: null
  /** User to run as. */
  uid?: number
  /** Group to run as. */
  gid?: number
}

/** node-pty's spawn. */
export type PtySpawn = (file: string, args: string[], options: PtySpawnOptions) => PtyProcess

/** What the agent takes from node-pty. */
export interface Pty {
  /** Starts a program on a new pty. */
  spawn: PtySpawn
  /** TIOCSWINSZ on any open tty fd (node-pty's native `resize`, which takes any fd). */
  setWindowSize(fd: number, cols: number, rows: number): void
}

/** The parts of node-pty's package the loader reads. */
interface NodePtyModule {
  spawn?: unknown
}
interface NodePtyUtils {
  loadNativeModule(name: string): { module: { resize?: unknown } }
}

/** Where the drivers put node-pty: beside the agent's own file. */
function besideAgent(): string {
  return fileURLToPath(new URL('./node-pty', import.meta.url))
}

let loaded: Pty | undefined

/** node-pty, loaded once; AGENT_UNAVAILABLE when it is missing. */
export function loadPty(): Pty {
  if (loaded) return loaded
  const require = createRequire(import.meta.url)
  const beside = besideAgent()
  const candidates = existsSync(beside) ? [beside, 'node-pty'] : ['node-pty']
  let lastError: unknown
  for (const id of candidates) {
    try {
      const mod = require(id) as NodePtyModule
      // The native module node-pty itself loaded: `require` hands back the same instance.
      const native = (require(`${id}/lib/utils`) as NodePtyUtils).loadNativeModule('pty').module
      if (typeof mod.spawn === 'function' && typeof native.resize === 'function') {
        loaded = { spawn: mod.spawn as PtySpawn, setWindowSize: native.resize as Pty['setWindowSize'] }
        return loaded
      }
    } catch (error) {
      lastError = error
    }
  }
  throw new AgentError(
    'AGENT_UNAVAILABLE',
    `terminals need node-pty, which this agent cannot load (${lastError instanceof Error ? lastError.message.split('\n')[0] : 'not found'}); reinstall the runner, or in a checkout run pnpm install`,
  )
}
