import type { HttpClient } from './http-client.ts'
import type { RunnerConnection } from './runner-connection.ts'
import type { ConnectOptions } from './sandbox-options.ts'
import type { Shell } from './shell.ts'
import { resolveWebSocket, type WebSocketConstructor } from './web-socket-like.ts'

/**
 * What one `Sandbox` handle shares with the modules that implement its methods: the runner's
 * client and credential, the sandbox's REST path, and the shells the handle has open.
 */
export interface SandboxContext {
  /** Sandbox id (`sb_...`). */
  readonly id: string
  /** The runner's HTTP client. */
  readonly http: HttpClient
  /** The API key or sandbox token, sent on WebSocket upgrades. */
  readonly secret: string
  /** The options the handle was made with. */
  readonly options: ConnectOptions
  /** The sandbox's REST path, `/v1/sandboxes/<id>`. */
  readonly path: string
  /** Shells opened through the handle and not yet closed; hibernate, destroy and dispose close them. */
  readonly shells: Set<Shell>
  /** The WebSocket constructor (injected, `ws` or global), resolved when the handle is made. */
  webSocket(): Promise<WebSocketConstructor>
}

/** The context of a handle on sandbox `id`, reached through `runner`. */
export function sandboxContext(runner: RunnerConnection, id: string): SandboxContext {
  // Resolved at once, not on the first shell: on Node that imports `ws` (milliseconds of module
  // loading), which then overlaps the REST calls a first shell makes before its socket opens.
  const WebSocket = resolveWebSocket(runner.options.WebSocket)
  // A runtime without any WebSocket still works over REST; the first socket reports the error.
  WebSocket.catch(() => {})
  return {
    id,
    http: runner.http,
    secret: runner.secret,
    options: runner.options,
    path: `/v1/sandboxes/${encodeURIComponent(id)}`,
    shells: new Set(),
    webSocket: () => WebSocket,
  }
}
