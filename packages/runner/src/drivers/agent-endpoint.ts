// Where the runner reaches an agent, made so sandbox code cannot redirect it. The runner binds
// the agent's listening Unix socket itself, in a directory only the runner's user can enter
// and that is never mounted into a sandbox, and hands the listening fd to the agent at start;
// the link secret goes to the agent on a pipe. Every later connect refuses a path that is not
// that socket (a symlink, a file, a directory someone else owns or can write). Socket paths
// longer than sun_path allows are reached through /proc/self/fd of the opened directory.

import type { ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { closeSync, constants as fs, lstatSync, mkdirSync, openSync, renameSync } from 'node:fs'
import { createServer, type Server } from 'node:net'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { RunnerError } from '../runner-error.ts'

/** The socket's file name inside its directory. */
const SOCKET_NAME = 'agent.sock'

/** The longest socket path bound or connected directly (sun_path holds 108 bytes with NUL). */
const MAX_SOCKET_PATH = 100

/** A bound, listening agent socket whose fd goes to the agent. */
export interface AgentEndpoint {
  /** The socket's path on the host. */
  socketPath: string
  /** The listening socket's fd, to pass to the agent's process. */
  fd: number
  /** Closes the runner's copy; the socket stays as long as the agent holds its fd. */
  close(): void
}

/** The path of the agent socket in `dir`. */
export function agentSocketPath(dir: string): string {
  return join(dir, SOCKET_NAME)
}

/** Creates `dir` (mode 0700) if needed and checks that only the runner's user controls it. */
export function ensurePrivateDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 })
  checkPrivateDir(dir)
}

/** Throws unless `dir` is a real directory owned by this process's user with no group/other access. */
function checkPrivateDir(dir: string): void {
  const stat = lstatSync(dir)
  const uid = process.getuid?.() ?? stat.uid
  if (!stat.isDirectory() || stat.uid !== uid || (stat.mode & 0o077) !== 0) {
    throw new RunnerError(
      'AGENT_UNAVAILABLE',
      `${dir} must be a directory owned by the runner's user with mode 0700; remove it and retry`,
    )
  }
}

/** Runs `use` with a connectable path for `dir`'s socket, short enough for sun_path. */
async function withSocketPath<T>(dir: string, use: (path: string) => Promise<T>): Promise<T> {
  const direct = agentSocketPath(dir)
  if (Buffer.byteLength(direct) <= MAX_SOCKET_PATH) return use(direct)
  const fd = openSync(dir, fs.O_RDONLY | fs.O_DIRECTORY | fs.O_NOFOLLOW)
  try {
    return await use(`/proc/self/fd/${fd}/${SOCKET_NAME}`)
  } finally {
    closeSync(fd)
  }
}

/** Binds a fresh listening socket at `<dir>/agent.sock` (replacing a stale one) for an agent to inherit. */
export async function bindAgentSocket(dir: string): Promise<AgentEndpoint> {
  ensurePrivateDir(dir)
  // Bound under a temporary name and renamed into place, so closing the runner's copy (which
  // unlinks the name it bound) leaves the agent's socket where connects look for it.
  const temp = `${SOCKET_NAME}.${randomBytes(6).toString('hex')}`
  const server = createServer()
  await withSocketPath(dir, async (path) => {
    const bindPath = path.slice(0, -SOCKET_NAME.length) + temp
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(bindPath, () => {
        server.off('error', reject)
        resolve()
      })
    })
  })
  renameSync(join(dir, temp), agentSocketPath(dir))
  return { socketPath: agentSocketPath(dir), fd: listeningFd(server), close: () => server.close() }
}

/** The OS fd of a listening server (Node keeps it on the internal handle). */
function listeningFd(server: Server): number {
  const handle: unknown = Reflect.get(server, '_handle')
  const fd = typeof handle === 'object' && handle !== null ? Reflect.get(handle, 'fd') : undefined
  if (typeof fd !== 'number' || fd < 0) throw new RunnerError('INTERNAL', 'the agent socket has no fd')
  return fd
}

/** Checks that `<dir>/agent.sock` is the socket the runner bound, then calls `connect` with a usable path. */
export async function withAgentSocket<T>(dir: string, connect: (path: string) => Promise<T>): Promise<T> {
  checkPrivateDir(dir)
  const stat = lstatSync(agentSocketPath(dir), { throwIfNoEntry: false })
  if (stat === undefined) {
    const error = Object.assign(new Error(`${agentSocketPath(dir)} does not exist`), { code: 'ENOENT' })
    throw error
  }
  if (!stat.isSocket() || stat.uid !== (process.getuid?.() ?? stat.uid)) {
    throw new RunnerError(
      'AGENT_UNAVAILABLE',
      `${agentSocketPath(dir)} is not the agent socket the runner made; the sandbox cannot be reached`,
    )
  }
  return withSocketPath(dir, connect)
}

/** Writes the link secret into the child's pipe at `fd` and closes it; the agent reads it to EOF. */
export function sendLinkSecret(child: ChildProcess, fd: number, secret: string): void {
  const pipe = child.stdio[fd]
  if (!(pipe instanceof Writable)) throw new RunnerError('INTERNAL', `fd ${fd} of the agent is not a pipe`)
  pipe.on('error', () => {})
  pipe.end(secret)
}
