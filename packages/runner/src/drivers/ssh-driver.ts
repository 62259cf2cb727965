// The ssh driver: a sandbox whose agent runs on a remote host the operator configured
// (ssh-hosts.ts), reached over one SSH connection per host (ssh-connection.ts). On create it
// checks the remote (Linux, bash, a Node >= 22 or the runner's own uploaded), makes a 0700
// folder per sandbox there, uploads the agent bundle into it and starts the agent detached
// (ssh-remote.ts), listening on a unix socket in that folder. The runner reaches the socket
// through OpenSSH's streamlocal forwarding, so the link (and its secret proof) is the same as
// with every driver. A dropped connection is opened again on the next connect, with backoff;
// the agent never notices, so shells keep their state. There is no isolation from the remote
// user: sandbox code runs as that user, with its files and network.
import { createHash } from 'node:crypto'
import { posix } from 'node:path'
import type { Duplex } from 'node:stream'
import type { SandboxLimits } from '@conch/protocol'
import { z } from 'zod'
import { RunnerError } from '../runner-error.ts'
import { locateAgentBundle } from './agent-bundle.ts'
import { DEFAULT_SANDBOX_PATH, sandboxBaseEnv } from './sandbox-base-env.ts'
import type { DriverSandbox, Liveness, SandboxDriver, SandboxSpec } from './sandbox-driver.ts'
import { SshConnection } from './ssh-connection.ts'
import type { SshHost, SshHosts } from './ssh-hosts.ts'
import {
  aliveScript,
  bwrapPrefix,
  envFile,
  MIN_NODE_MAJOR,
  nodeMajor,
  parseProbe,
  prepareScript,
  probeScript,
  REMOTE_FILES,
  type RemoteFacts,
  shellQuote,
  startScript,
  stopScript,
} from './ssh-remote.ts'

/** The ssh driver's handle state. */
const SshState = z.object({
  /** The configured host's name (never its address or key). */
  host: z.string(),
  /** The sandbox's folder on the remote. */
  dir: z.string(),
  /** The Node binary on the remote. */
  node: z.string(),
  /** The remote user's PATH, given to the agent. */
  path: z.string(),
  /** The sandbox's link secret. */
  linkSecret: z.string(),
  /** bubblewrap on the remote when it works there; the agent runs inside it. */
  bwrap: z.string().optional(),
  /** The agent's pid on the remote, once started. */
  pid: z.number().int().positive().optional(),
})
type SshState = z.infer<typeof SshState>

/** What a sandbox wrapped in bubblewrap on its host is told. */
const BWRAP_DESCRIPTION =
  "ssh driver with bubblewrap on the remote host: the agent and its shells get their own pid, ipc and uts namespaces, a private /tmp and a read-only view of the host's files with only the sandbox's folder writable — but they run as the host's SSH user (they can read what that user can), use the host's network, and limits are not enforced"

/** Deadline of one SSH connect (handshake and login). */
const CONNECT_TIMEOUT_MS = 10_000

/** Options of the ssh driver. */
export interface SshDriverOptions {
  /** The hosts the operator configured. */
  hosts: SshHosts
  /** The agent's source main file to bundle; defaults to the shipped bundle. */
  agentEntry?: string
  /** The runner's Node, uploaded to a linux-x64 remote that has no Node >= 22. */
  nodePath?: string
}

/** A driver that runs each agent on a configured SSH host. */
export class SshDriver implements SandboxDriver {
  /** Driver name. */
  readonly name = 'ssh'
  /** Nothing isolates a sandbox from the remote user. */
  readonly isolation = 'none' as const
  /** The agent runs on another machine, so the runner's host is not exposed to it. */
  readonly remote = true
  /** Create requests name a host. */
  readonly takesHost = true
  /** What users are told on every sandbox. */
  readonly description =
    "ssh driver: the agent runs on a remote host the operator configured, as that host's SSH user with NO isolation from it — sandbox code sees that user's files and the host's network, other sandboxes on the same host, and limits are not enforced"
  readonly #hosts: SshHosts
  readonly #agentEntry: string | undefined
  readonly #nodePath: string
  readonly #connections = new Map<string, Promise<SshConnection>>()

  /** Creates the driver; no connection is made until a sandbox needs one. */
  constructor(options: SshDriverOptions) {
    this.#hosts = options.hosts
    this.#agentEntry = options.agentEntry
    this.#nodePath = options.nodePath ?? process.execPath
  }

  /** Why this runner cannot offer the driver: no hosts configured. */
  problem(): string | null {
    return this.#hosts.size === 0 ? 'no SSH hosts are configured (--ssh-hosts <file>)' : null
  }

  /** The configured host names, for messages and the API. */
  hostNames(): string[] {
    return [...this.#hosts.keys()]
  }

  /** The ssh driver enforces no limit, so it accepts none. */
  limitsProblem(limits: SandboxLimits): string | null {
    const asked = Object.keys(limits).filter((k) => limits[k as keyof SandboxLimits] !== undefined)
    return asked.length === 0
      ? null
      : `the ssh driver cannot enforce limits (${asked.join(', ')}) on a remote host; drop them`
  }

  /** Checks the remote, makes the sandbox's folder there and uploads the agent into it. */
  async create(spec: SandboxSpec): Promise<DriverSandbox> {
    const name = this.#hostName(spec.host)
    const host = this.#hosts.get(name)!
    const ssh = await this.#connection(name)
    const facts = parseProbe((await this.#run(ssh, probeScript(host.nodePath))).stdout)
    const node = await this.#remoteNode(name, host, ssh, facts)
    const base = host.dir ?? posix.join(facts.home, '.conch')
    const dir = posix.join(base, 'sandboxes', spec.id)
    const made = await this.#run(ssh, prepareScript(dir))
    if (made.code !== 0) {
      throw new RunnerError(
        'AGENT_UNAVAILABLE',
        `could not make the sandbox folder on SSH host "${name}": ${made.stderr.trim()}`,
      )
    }
    await ssh.upload(await locateAgentBundle(this.#agentEntry), `${dir}/${REMOTE_FILES.bundle}`, 0o600)
    const bwrap = facts.bwrapWorks ? facts.bwrap : undefined
    const state: SshState = {
      host: name,
      dir,
      node,
      path: facts.path,
      linkSecret: spec.linkSecret,
      ...(bwrap === undefined ? {} : { bwrap }),
    }
    const workdir = `${dir}/${REMOTE_FILES.workspace}`
    if (bwrap === undefined) return { id: spec.id, workdir, state }
    return { id: spec.id, workdir, state, isolation: 'namespace', description: BWRAP_DESCRIPTION }
  }

  /** Sends the environment and link secret as 0600 files, then starts the agent detached. */
  async startAgent(sandbox: DriverSandbox, spec: SandboxSpec): Promise<DriverSandbox> {
    const state = SshState.parse(sandbox.state)
    const ssh = await this.#connection(state.host)
    // The agent runs as the SSH user the host's configuration logs in as.
    const user = this.#hosts.get(state.host)!.user
    const env = {
      ...sandboxBaseEnv({ user, home: sandbox.workdir, path: state.path || DEFAULT_SANDBOX_PATH }),
      ...spec.env,
    }
    await ssh.writeFile(`${state.dir}/${REMOTE_FILES.env}`, envFile(env), 0o600)
    await ssh.writeFile(`${state.dir}/${REMOTE_FILES.secret}`, state.linkSecret, 0o600)
    const args = [
      '--socket',
      `${state.dir}/${REMOTE_FILES.socket}`,
      '--secretFile',
      `${state.dir}/${REMOTE_FILES.secret}`,
      '--root',
      sandbox.workdir,
      '--scrollbackBytes',
      String(spec.scrollbackBytes),
      '--maxSessions',
      String(spec.maxSessions),
    ]
    const wrap = state.bwrap === undefined ? [] : bwrapPrefix(state.bwrap, state.dir, state.node)
    const started = await this.#run(ssh, startScript(state.dir, state.node, args, wrap))
    const pid = Number(started.stdout.trim())
    if (!Number.isInteger(pid) || pid <= 0) {
      throw new RunnerError(
        'AGENT_UNAVAILABLE',
        `the agent did not start on SSH host "${state.host}"; see ${state.dir}/${REMOTE_FILES.log} there`,
      )
    }
    return { ...sandbox, state: { ...state, pid } }
  }

  /** Opens the agent's socket over SSH, reconnecting with backoff until `timeoutMs`. */
  async connect(sandbox: DriverSandbox, timeoutMs: number): Promise<Duplex> {
    const state = SshState.parse(sandbox.state)
    const deadline = Date.now() + timeoutMs
    let delay = 50
    for (;;) {
      try {
        const ssh = await this.#connection(state.host)
        return await ssh.openSocket(`${state.dir}/${REMOTE_FILES.socket}`)
      } catch (error) {
        if (error instanceof RunnerError && error.code === 'SSH_HOST_KEY_REJECTED') throw error
        if (Date.now() + delay >= deadline) {
          throw new RunnerError(
            'AGENT_UNAVAILABLE',
            `the agent of sandbox ${sandbox.id} on SSH host "${state.host}" could not be reached within ${timeoutMs} ms (${(error as Error).message}); the runner keeps retrying`,
            { cause: error },
          )
        }
        await new Promise((r) => setTimeout(r, delay))
        delay = Math.min(delay * 2, 2_000)
      }
    }
  }

  /** Asks the remote whether the agent still runs; a host that cannot be reached counts as alive (unreachable, retried). */
  async isAlive(sandbox: DriverSandbox): Promise<Liveness> {
    const state = SshState.parse(sandbox.state)
    if (!state.pid) return { alive: false, reason: 'the agent was never started' }
    let ssh: SshConnection
    try {
      ssh = await this.#connection(state.host)
    } catch {
      return { alive: true, reason: null }
    }
    const result = await this.#run(ssh, aliveScript(state.dir, state.pid)).catch(() => null)
    if (result === null || result.stdout.startsWith('alive')) return { alive: true, reason: null }
    const tail = result.stdout.split('\n').slice(1).join(' ').trim()
    return {
      alive: false,
      reason: `agent process ${state.pid} on SSH host "${state.host}" is no longer running${tail ? ` (its log ends: ${tail})` : ''}`,
    }
  }

  /** Ends the remote agent and everything below it. */
  async stop(sandbox: DriverSandbox): Promise<void> {
    const state = SshState.parse(sandbox.state)
    const ssh = await this.#connection(state.host)
    await this.#run(ssh, stopScript(state.dir, state.pid, false))
  }

  /** Ends the remote agent and deletes the sandbox's folder on the remote; says what is left when the host cannot be reached. */
  async destroy(sandbox: DriverSandbox): Promise<void> {
    const state = SshState.parse(sandbox.state)
    try {
      const ssh = await this.#connection(state.host)
      await this.#run(ssh, stopScript(state.dir, state.pid, true))
    } catch (error) {
      throw new RunnerError(
        'AGENT_UNAVAILABLE',
        `sandbox ${sandbox.id} is forgotten, but SSH host "${state.host}" could not be reached to stop its agent (pid ${state.pid ?? 'none'}) and remove ${state.dir}; do that on the host`,
        { cause: error },
      )
    }
  }

  /** Closes every SSH connection (agents keep running). */
  close(): void {
    for (const pending of this.#connections.values()) pending.then((c) => c.close()).catch(() => {})
    this.#connections.clear()
  }

  /** The request's host, or the only configured one; SSH_HOST_UNKNOWN otherwise. */
  #hostName(requested: string | undefined): string {
    const names = this.hostNames()
    if (requested === undefined && names.length === 1) return names[0]!
    if (requested !== undefined && this.#hosts.has(requested)) return requested
    throw new RunnerError(
      'SSH_HOST_UNKNOWN',
      requested === undefined
        ? `the ssh driver needs a host; name one of ${names.join(', ')} in "host"`
        : `SSH host "${requested}" is not configured on this runner; configured: ${names.join(', ') || 'none'} (the operator adds hosts with --ssh-hosts)`,
      { details: { hosts: names } },
    )
  }

  /** The open connection to a host, opening a new one when there is none or it closed. */
  async #connection(name: string): Promise<SshConnection> {
    const host = this.#hosts.get(name)
    if (!host) {
      throw new RunnerError(
        'SSH_HOST_UNKNOWN',
        `SSH host "${name}" is no longer configured on this runner; add it back to --ssh-hosts or destroy its sandboxes`,
        { details: { hosts: this.hostNames() } },
      )
    }
    const pending = this.#connections.get(name)
    if (pending) {
      const open = await pending.catch(() => null)
      if (open && !open.closed) return open
      if (this.#connections.get(name) === pending) this.#connections.delete(name)
    }
    const opening = SshConnection.open(name, host, CONNECT_TIMEOUT_MS)
    this.#connections.set(name, opening)
    opening.catch(() => {
      if (this.#connections.get(name) === opening) this.#connections.delete(name)
    })
    return opening
  }

  /** Runs a bash script on the remote (fed on stdin, so no value reaches its command line). */
  #run(ssh: SshConnection, script: string): ReturnType<SshConnection['exec']> {
    return ssh.exec('exec /bin/bash --noprofile --norc -s', script)
  }

  /** The remote Node: the configured or found one when >= 22, else the runner's own, uploaded once per host. */
  async #remoteNode(name: string, host: SshHost, ssh: SshConnection, facts: RemoteFacts): Promise<string> {
    if (facts.os !== 'Linux' || facts.bash === '') {
      throw new RunnerError(
        'AGENT_UNAVAILABLE',
        `SSH host "${name}" is not a Linux host with bash (found ${facts.os || 'unknown'}${facts.bash ? '' : ', no bash'}); the ssh driver needs both`,
      )
    }
    if (facts.node !== '' && nodeMajor(facts.nodeVersion) >= MIN_NODE_MAJOR) return facts.node
    if (host.nodePath !== undefined) {
      throw new RunnerError(
        'AGENT_UNAVAILABLE',
        `the nodePath of SSH host "${name}" is not a Node ${MIN_NODE_MAJOR} or newer (found ${facts.nodeVersion || 'nothing runnable'}); fix it in --ssh-hosts`,
      )
    }
    const glibc = /glibc|gnu libc/i.test(facts.libc)
    if (facts.arch !== 'x86_64' || !glibc || process.platform !== 'linux' || process.arch !== 'x64') {
      throw new RunnerError(
        'AGENT_UNAVAILABLE',
        `SSH host "${name}" has no Node ${MIN_NODE_MAJOR} or newer on its PATH and is not linux-x64 with glibc (${facts.arch}, ${facts.libc || 'unknown libc'}), so the runner cannot send its own; install Node ${MIN_NODE_MAJOR}+ there or set its nodePath`,
      )
    }
    const base = host.dir ?? posix.join(facts.home, '.conch')
    const tag = createHash('sha256')
      .update(`${process.version}\0${this.#nodePath}`)
      .digest('hex')
      .slice(0, 12)
    const remote = posix.join(base, 'node', `node-${process.version}-${tag}`)
    const have = await this.#run(ssh, `test -x ${shellQuote(remote)} && echo yes`)
    if (have.stdout.trim() !== 'yes') {
      await this.#run(ssh, `umask 077; mkdir -p ${shellQuote(posix.dirname(remote))}`)
      const temp = `${remote}.${process.pid}.tmp`
      await ssh.upload(this.#nodePath, temp, 0o700)
      await this.#run(ssh, `mv -f ${shellQuote(temp)} ${shellQuote(remote)}`)
    }
    return remote
  }
}
