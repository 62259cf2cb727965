// A SandboxDriver turns a sandbox spec into a running agent and a byte stream to it.
//
// The runner never knows how a sandbox is built. It asks the driver to `create` one (which
// prepares the workspace and returns a JSON-serialisable handle), to `startAgent` in it, and to
// `connect` to that agent. The handle is stored in the runner's database as it is, so a restarted
// runner can `isAlive` and `connect` again without the driver keeping memory of its own:
//   local      handle = { pid, socketPath, root }          stream = Unix socket
//   namespace  handle = { pid, socketPath, root, cgroup }   stream = Unix socket into the netns-less mount
//   microVM    handle = { vmPid, cid, port, image }        stream = vsock (AF_VSOCK, or a host proxy socket)
import type { Duplex } from 'node:stream'
import type { Isolation, SandboxLimits, SandboxUsage } from '@conch/protocol'
import { z } from 'zod'
import { RunnerError } from '../runner-error.ts'

/** What a driver needs to build a sandbox. */
export interface SandboxSpec {
  /** Sandbox id, unique across the runner's life. */
  id: string
  /** Base environment of the sandbox's sessions (never the runner's own). */
  env: Record<string, string>
  /** Resource limits; a driver without isolation records but cannot enforce them. */
  limits: SandboxLimits
  /** Bytes of scrollback the agent keeps per session. */
  scrollbackBytes: number
  /** Most sessions the agent may keep open (the runner's per-sandbox limit). */
  maxSessions: number
  /** The sandbox's link secret (64 hex digits): the driver stores it in its state and hands it to the agent. */
  linkSecret: string
  /** The configured host a create request named, for drivers that `takesHost` (ssh). */
  host?: string
}

/** What every driver's state holds besides its own facts: the link secret, for reconnecting. */
const DriverLinkState = z.object({ linkSecret: z.string().regex(/^[0-9a-f]{64}$/) })

/** The link secret stored in a sandbox's driver state; AGENT_UNAVAILABLE when there is none. */
export function linkSecretOf(sandbox: DriverSandbox): string {
  const parsed = DriverLinkState.safeParse(sandbox.state)
  if (!parsed.success) {
    throw new RunnerError(
      'AGENT_UNAVAILABLE',
      `sandbox ${sandbox.id} has no link secret (it was made by an older runner); destroy it and create a new one`,
    )
  }
  return parsed.data.linkSecret
}

/** A driver's handle on one sandbox: serialisable, stored by the runner, passed back on every call. */
export interface DriverSandbox {
  /** Sandbox id. */
  id: string
  /** The workspace directory as the sandbox's shells see it. */
  workdir: string
  /** Driver-specific facts (pid, socket path, cid); JSON only. */
  state: Record<string, unknown>
  /** From `create`, when this sandbox's isolation differs from the driver's (ssh: what its host gives). */
  isolation?: Isolation
  /** From `create`, with `isolation`: what this sandbox's isolation does and does not cover. */
  description?: string
}

/** The result of a liveness check. */
export interface Liveness {
  /** True when the agent process exists. */
  alive: boolean
  /** Why it is not alive, for the sandbox's `deadReason`. */
  reason: string | null
}

/** Builds, starts, connects to and tears down sandboxes. */
export interface SandboxDriver {
  /** Name used in the API (`local`, `namespace`, `vm`). */
  readonly name: string
  /** What isolates a sandbox from the host. */
  readonly isolation: Isolation
  /** One sentence on what the driver does and does not isolate; shown on every sandbox. */
  readonly description: string
  /** True when sandboxes run on another machine (ssh): no isolation then does not expose the runner's host. */
  readonly remote?: boolean
  /** True when a create request may name a configured host (`host`). */
  readonly takesHost?: boolean
  /**
   * Why this driver cannot enforce `limits` on this host, or null when it can. The runner
   * refuses to create a sandbox with a limit its driver would not enforce.
   */
  limitsProblem(limits: SandboxLimits): string | null
  /** The part of the runner's default limits this driver enforces on this host; all of them when absent. */
  enforceableDefaults?(defaults: SandboxLimits): SandboxLimits
  /** One line for the startup log when this driver gives less on this host than usual (limits not enforced); null otherwise. */
  hostWarning?(): string | null
  /**
   * Destroys what a runner killed inside `create` left of sandboxes it never recorded (see
   * unrecorded-sandboxes.ts); ids in `known` (stored or pooled) are kept. Called once at start,
   * before any create. Returns the ids destroyed.
   */
  reapUnrecorded?(known: ReadonlySet<string>): Promise<string[]>
  /** Prepares a sandbox (workspace, cgroup, VM image) without starting its agent. */
  create(spec: SandboxSpec): Promise<DriverSandbox>
  /** Starts the agent, detached from the runner; resolves with the updated handle. */
  startAgent(sandbox: DriverSandbox, spec: SandboxSpec): Promise<DriverSandbox>
  /** Opens a byte stream to the agent; rejects when it does not answer within `timeoutMs`. */
  connect(sandbox: DriverSandbox, timeoutMs: number): Promise<Duplex>
  /** Whether the agent is still there. */
  isAlive(sandbox: DriverSandbox): Promise<Liveness>
  /** Stops the agent and everything it started; the workspace stays. */
  stop(sandbox: DriverSandbox): Promise<void>
  /** Stops the agent and deletes the workspace and every trace of the sandbox. */
  destroy(sandbox: DriverSandbox): Promise<void>
  /** The sandbox's workspace folder on the host (where snapshots read and restore files); a driver without one cannot snapshot. */
  hostWorkspace?(sandbox: DriverSandbox): string
  /** What the sandbox uses now (its cgroups' counters); null once its groups are gone. Drivers that cannot measure leave it out. */
  usage?(sandbox: DriverSandbox): Promise<SandboxUsage | null>
  /**
   * Live snapshots (the gVisor driver): `checkpoint` saves the whole sandbox, processes and
   * memory, into the files of `imageDir` once its agent suspended its link, and stops it;
   * `restoreAgent` is `startAgent` from such an image (`spec` carries the sandbox's own folders
   * and a link secret the restored agent picks up).
   */
  checkpoint?(sandbox: DriverSandbox, imageDir: string): Promise<void>
  /** The driver's runtime version (runsc's), which a checkpoint image must match to be restored. */
  version?(): string | null
  /** Starts a sandbox from a checkpoint image instead of a fresh agent (see `checkpoint`). */
  restoreAgent?(sandbox: DriverSandbox, spec: SandboxSpec, imageDir: string): Promise<DriverSandbox>
}
