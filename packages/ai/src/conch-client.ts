// The MCP server's handle on one runner, with one caller's credentials: sandboxes by id and one
// open shell per session, kept across tool calls so that a model's `cd` in one call is the
// working directory of the next, and each run reuses the shell's WebSocket.
import {
  ConchError,
  type ConnectOptions,
  Sandbox,
  type SandboxInfo,
  SessionNotFoundError,
  type Shell,
  ShellClosedError,
} from '@conch/sdk'

/** Where the runner is and who is asking. */
export interface ConchClientOptions {
  /** Runner (or router) URL. */
  url: string
  /** The runner's API key; or use `token`. */
  apiKey?: string | undefined
  /** A sandbox-scoped access token; it reaches only its sandbox. */
  token?: string | undefined
}

/** Sandboxes and shells of one caller. */
export class ConchClient {
  readonly #connect: ConnectOptions | null
  readonly #sandboxes = new Map<string, Promise<Sandbox>>()
  readonly #shells = new Map<string, Promise<Shell>>()

  constructor(options: ConchClientOptions | null) {
    this.#connect = options && { url: options.url, apiKey: options.apiKey, token: options.token }
  }

  /** A client that reaches only `sandbox` (an agent given its own sandbox). */
  static bound(sandbox: Sandbox): ConchClient {
    const client = new ConchClient(null)
    client.adopt(sandbox)
    return client
  }

  /** The connection options, for calls that are not about one sandbox. */
  get connectOptions(): ConnectOptions {
    if (!this.#connect)
      throw new Error('this client is bound to one sandbox; create and list sandboxes with the SDK')
    return this.#connect
  }

  /** A sandbox this caller may reach; SandboxNotFoundError when it does not exist. */
  sandbox(id: string): Promise<Sandbox> {
    let found = this.#sandboxes.get(id)
    if (!found) {
      if (!this.#connect) return Promise.reject(new Error(`this client is bound to one sandbox, not ${id}`))
      found = Sandbox.connect(id, this.#connect)
      this.#sandboxes.set(id, found)
      found.catch(() => this.#sandboxes.delete(id))
    }
    return found
  }

  /** The sandboxes this caller can list (the API key's; a sandbox token lists none). */
  async listSandboxes(): Promise<SandboxInfo[]> {
    if (!this.#connect) return []
    try {
      return await Sandbox.list(this.#connect)
    } catch (err) {
      if (err instanceof ConchError && err.code === 'FORBIDDEN') return []
      throw err
    }
  }

  /** Remembers a sandbox this caller just created. */
  adopt(sandbox: Sandbox): void {
    this.#sandboxes.set(sandbox.id, Promise.resolve(sandbox))
  }

  /**
   * The open shell of a session, opened (and the session created) on first use.
   * A shell that closed is opened again, reattaching to the same session.
   */
  async shell(sandboxId: string, sessionId: string): Promise<Shell> {
    const key = `${sandboxId}\n${sessionId}`
    const cached = this.#shells.get(key)
    if (cached) {
      const shell = await cached.catch(() => null)
      if (shell?.isOpen) return shell
      this.#shells.delete(key)
    }
    const opening = this.sandbox(sandboxId).then((sb) => openSession(sb, sessionId))
    this.#shells.set(key, opening)
    opening.catch(() => this.#shells.delete(key))
    return opening
  }

  /** Forgets a sandbox and closes its shells (after it was destroyed). */
  forget(sandboxId: string): void {
    this.#sandboxes.delete(sandboxId)
    for (const [key, shell] of this.#shells) {
      if (!key.startsWith(`${sandboxId}\n`)) continue
      this.#shells.delete(key)
      void shell.then((s) => s.close()).catch(() => {})
    }
  }

  /** Closes every shell; sandboxes and sessions live on in the runner. */
  close(): void {
    for (const shell of this.#shells.values()) void shell.then((s) => s.close()).catch(() => {})
    this.#shells.clear()
    this.#sandboxes.clear()
  }
}

/**
 * Reattaches to a session, creating it when it does not exist yet. A session whose bash ended
 * (`exit`) is replaced by a new one of the same name, as a terminal opens a new tab.
 */
async function openSession(sb: Sandbox, sessionId: string): Promise<Shell> {
  try {
    return await sb.reattachShell(sessionId)
  } catch (err) {
    if (err instanceof ShellClosedError) await sb.deleteSession(sessionId)
    else if (!(err instanceof SessionNotFoundError)) throw err
    return sb.shell({ id: sessionId })
  }
}
