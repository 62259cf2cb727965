// One SSH connection to a configured host, with the ssh2 library (pure JavaScript: no ssh
// client on the runner's host, no child processes to supervise, and host-key checking,
// commands, SFTP and OpenSSH's unix-socket forwarding on one in-process connection). The host
// key is checked against known_hosts before any authentication; a key that is not trusted
// ends the handshake with SSH_HOST_KEY_REJECTED. Keys are read from files at connect time and
// never logged; messages name the host only by its configured name. ssh2 is loaded on the first
// connect, not with the runner: it costs about 17 MB (a WebAssembly memory for its poly1305 and
// its protocol code), and most runners never use the ssh driver.
import { readFileSync } from 'node:fs'
import type { Duplex } from 'node:stream'
import type ssh2 from 'ssh2'
import { RunnerError } from '../runner-error.ts'
import { checkHostKeyFile, type HostKeyVerdict, knownHostsName } from './known-hosts.ts'
import { knownHostsFileOf, type SshHost } from './ssh-hosts.ts'

/** What a remote command printed and how it ended. */
export interface ExecResult {
  /** Exit code; null when a signal ended it or the channel closed first. */
  code: number | null
  /** Its standard output. */
  stdout: string
  /** Its standard error. */
  stderr: string
}

/** How often SSH keepalives go out, and how many may go unanswered before the connection is dropped. */
const KEEPALIVE = { intervalMs: 5_000, countMax: 3 }

/** Why a host key was refused, for the error message. */
const VERDICT_TEXT: Record<Exclude<HostKeyVerdict, 'trusted'>, string> = {
  unknown: 'is not in',
  mismatch: 'differs from the one in',
  revoked: 'is marked @revoked in',
}

/** ssh2, imported once on first use. */
let ssh2Module: Promise<typeof ssh2> | undefined

/** ssh2, loaded on first use; a failed load is AGENT_UNAVAILABLE and is tried again next time. */
async function loadSsh2(): Promise<typeof ssh2> {
  // ssh2 is CommonJS: its exports are the namespace's default.
  ssh2Module ??= import('ssh2').then((m) => (m as unknown as { default: typeof ssh2 }).default)
  try {
    return await ssh2Module
  } catch (error) {
    ssh2Module = undefined
    throw new RunnerError(
      'AGENT_UNAVAILABLE',
      `the runner could not load its SSH client library (ssh2: ${(error as Error).message}); reinstall the runner's dependencies`,
      { cause: error },
    )
  }
}

/** An open, authenticated SSH connection. */
export class SshConnection {
  readonly #client: ssh2.Client
  #closed = false

  private constructor(client: ssh2.Client) {
    this.#client = client
    client.on('close', () => {
      this.#closed = true
    })
  }

  /** Connects and authenticates to `host` (named `name` in messages) within `timeoutMs`. */
  static async open(name: string, host: SshHost, timeoutMs: number): Promise<SshConnection> {
    const knownHosts = knownHostsFileOf(host)
    const listedAs = knownHostsName(host.address, host.port)
    let refused: HostKeyVerdict = 'trusted'
    let privateKey: Buffer | undefined
    if (host.privateKeyFile !== undefined) {
      try {
        privateKey = readFileSync(host.privateKeyFile)
      } catch (error) {
        throw new RunnerError(
          'AGENT_UNAVAILABLE',
          `the key file of SSH host "${name}" cannot be read (${(error as NodeJS.ErrnoException).code}); the operator must fix --ssh-hosts`,
        )
      }
    }
    const { Client } = await loadSsh2()
    const client = new Client()
    return new Promise((resolve, reject) => {
      const fail = (error: Error): void => {
        client.end()
        if (refused !== 'trusted') {
          reject(
            new RunnerError(
              'SSH_HOST_KEY_REJECTED',
              `SSH host "${name}" presented a host key that ${VERDICT_TEXT[refused]} its known_hosts file (as ${listedAs}); the connection was refused before logging in. If the host was really rebuilt, the operator must update that file`,
              { details: { host: name } },
            ),
          )
          return
        }
        reject(
          new RunnerError(
            'AGENT_UNAVAILABLE',
            `could not reach SSH host "${name}": ${whyNot(error, timeoutMs)}; check that it is up and that its user accepts the runner's key`,
            { cause: error },
          ),
        )
      }
      // `on`, not `once`: a connection that fails before its handshake can emit more than one
      // error (a timeout, then the lost connection), and an error without a listener would
      // crash the runner. Settling twice is harmless.
      client.on('error', fail)
      client.once('ready', () => {
        client.off('error', fail)
        client.on('error', () => {})
        // The link is small request/answer frames: Nagle's algorithm would hold each one back.
        client.setNoDelay(true)
        resolve(new SshConnection(client))
      })
      client.connect({
        host: host.address,
        port: host.port,
        username: host.user,
        ...(privateKey === undefined ? {} : { privateKey }),
        ...(host.agent ? { agent: process.env.SSH_AUTH_SOCK ?? '' } : {}),
        readyTimeout: timeoutMs,
        keepaliveInterval: KEEPALIVE.intervalMs,
        keepaliveCountMax: KEEPALIVE.countMax,
        hostVerifier: (key: Buffer) => {
          refused = checkHostKeyFile(knownHosts, listedAs, key)
          return refused === 'trusted'
        },
      })
    })
  }

  /** True once the connection has closed. */
  get closed(): boolean {
    return this.#closed
  }

  /** Runs `command` through the remote user's shell, feeding it `stdin`; resolves when it ends. */
  exec(command: string, stdin = ''): Promise<ExecResult> {
    return new Promise((resolve, reject) => {
      this.#client.exec(command, (error, channel) => {
        if (error) return reject(connectionLost(error))
        const out: Buffer[] = []
        const err: Buffer[] = []
        let code: number | null = null
        channel.on('data', (chunk: Buffer) => out.push(chunk))
        channel.stderr.on('data', (chunk: Buffer) => err.push(chunk))
        channel.on('exit', (exitCode: number | null) => {
          code = typeof exitCode === 'number' ? exitCode : null
        })
        channel.on('close', () =>
          resolve({
            code,
            stdout: Buffer.concat(out).toString('utf8'),
            stderr: Buffer.concat(err).toString('utf8'),
          }),
        )
        channel.end(stdin)
      })
    })
  }

  /** Writes `data` to the remote file `path`, created with `mode` (never wider). */
  writeFile(path: string, data: Buffer | string, mode: number): Promise<void> {
    return this.#withSftp(
      (sftp) =>
        new Promise((resolve, reject) =>
          sftp.writeFile(path, data, { mode, flag: 'wx' }, (error) =>
            error ? reject(connectionLost(error)) : resolve(),
          ),
        ),
    )
  }

  /** Copies the local file `from` to the remote `to`, created with `mode`. */
  upload(from: string, to: string, mode: number): Promise<void> {
    return this.#withSftp(
      (sftp) =>
        new Promise((resolve, reject) =>
          sftp.fastPut(from, to, { mode }, (error) => (error ? reject(connectionLost(error)) : resolve())),
        ),
    )
  }

  /** Opens a stream to the remote unix socket `path` (OpenSSH's direct-streamlocal). */
  openSocket(path: string): Promise<Duplex> {
    return new Promise((resolve, reject) => {
      this.#client.openssh_forwardOutStreamLocal(path, (error, channel) =>
        error ? reject(error) : resolve(channel),
      )
    })
  }

  /** Closes the connection. */
  close(): void {
    this.#closed = true
    this.#client.end()
  }

  async #withSftp<T>(use: (sftp: ssh2.SFTPWrapper) => Promise<T>): Promise<T> {
    const sftp = await new Promise<ssh2.SFTPWrapper>((resolve, reject) =>
      this.#client.sftp((error, s) => (error ? reject(connectionLost(error)) : resolve(s))),
    )
    try {
      return await use(sftp)
    } finally {
      sftp.end()
    }
  }
}

/** An SSH-level failure as the runner reports it. */
function connectionLost(error: Error): RunnerError {
  return new RunnerError('AGENT_UNAVAILABLE', `the SSH connection failed: ${error.message}`, { cause: error })
}

/** Why a connect failed, without the address or user (socket errors name both in their message). */
function whyNot(error: Error, timeoutMs: number): string {
  const level = Reflect.get(error, 'level')
  if (level === 'client-authentication') return "it refused the runner's key"
  if (level === 'client-timeout') return `no SSH handshake within ${timeoutMs} ms`
  const code = Reflect.get(error, 'code')
  return typeof code === 'string' ? `network error ${code}` : 'the SSH handshake failed'
}
