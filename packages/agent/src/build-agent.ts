import { AgentServer } from './agent-server.ts'
import { BackgroundProcesses } from './background-processes.ts'
import { ChildStdio, childStdioSpawn } from './child-stdio.ts'
import type { Clock } from './clock.ts'
import type { Logger } from './logger.ts'
import type { OomCheck } from './oom-check.ts'
import { ProcessTable } from './process-tree.ts'
import { SandboxState } from './sandbox-state.ts'
import { ScrollbackBudget } from './scrollback-budget.ts'
import { buildSessionEnv } from './session-env.ts'
import { SessionManager } from './session-manager.ts'
import type { SandboxUser, Spawn } from './spawner.ts'
import { TerminalManager } from './terminal-manager.ts'
import { WorkspaceFiles } from './workspace-files.ts'
import { WorkspacePaths } from './workspace-paths.ts'

/** Everything an agent is assembled from; `main.ts` fills it from argv and the environment. */
export interface AgentDeps {
  /** The sandbox's workspace root (must exist). */
  root: string
  /** The sandbox's base environment, without the agent's own variables. */
  baseEnv: Readonly<Record<string, string>>
  /** Process creation. */
  spawn: Spawn
  /** Time. */
  clock: Clock
  /** Logging. */
  logger: Logger
  /** Where sessions keep their command files. */
  tempRoot: string
  /** Output kept per session and per process for reattach. */
  scrollbackBytes?: number
  /** Output kept by all sessions and processes together (default `AGENT_SCROLLBACK_BUDGET_BYTES`). */
  scrollbackBudgetBytes?: number
  /** Time between the signals of a run's timeout. */
  killGraceMs?: number
  /** How long a new link connection may take to prove the secret (10 s by default). */
  handshakeTimeoutMs?: number
  /** Most sessions open at once. */
  maxSessions?: number
  /** Most background processes running at once. */
  maxProcesses?: number
  /** The sandbox's link secret, which a runner connection must prove it holds. */
  linkSecret: string
  /** Where a fresh secret arrives after `link.suspend` (the `--secretFile`); absent, the link cannot suspend. */
  resumeSecretFile?: string
  /** The user shells and processes run as, when it is not the agent's own (`spawn` applies it). */
  sandboxUser?: SandboxUser
  /** Tells whether a command's exit code was the sandbox's memory limit; never, when absent. */
  oomCheck?: OomCheck
  /** cgroup.procs files every terminal's program is moved into (`spawn` does it for the rest). */
  workCgroups?: readonly string[]
  /** Most terminals running at once. */
  maxTerminals?: number
  /** How long a TCP connection the runner closed may take to deliver its last bytes (`TCP_LINGER_MS`). */
  tcpLingerMs?: number
}

/** Assembles an agent server with its sessions, processes and files; call `listen` on it. */
export function buildAgent(deps: AgentDeps): { server: AgentServer; sessions: SessionManager } {
  const paths = new WorkspacePaths(deps.root)
  const childStdio = new ChildStdio(deps.tempRoot, deps.logger, deps.sandboxUser?.gid)
  const spawn = childStdioSpawn(deps.spawn, childStdio)
  const budget = new ScrollbackBudget(deps.scrollbackBudgetBytes)
  const sessions = new SessionManager({
    baseEnv: deps.baseEnv,
    root: deps.root,
    resolveDir: (dir) => server.hostDir(dir),
    spawn,
    clock: deps.clock,
    logger: deps.logger,
    processTable: new ProcessTable(deps.clock),
    tempRoot: deps.tempRoot,
    ...(deps.sandboxUser === undefined ? {} : { sandboxGid: deps.sandboxUser.gid }),
    ...(deps.scrollbackBytes === undefined ? {} : { scrollbackBytes: deps.scrollbackBytes }),
    scrollbackBudget: budget,
    ...(deps.killGraceMs === undefined ? {} : { killGraceMs: deps.killGraceMs }),
    ...(deps.maxSessions === undefined ? {} : { maxSessions: deps.maxSessions }),
    ...(deps.oomCheck === undefined ? {} : { oomCheck: deps.oomCheck }),
  })
  const processes = new BackgroundProcesses(
    spawn,
    deps.clock,
    deps.maxProcesses,
    deps.scrollbackBytes,
    budget,
  )
  const server: AgentServer = new AgentServer({
    paths,
    files: new WorkspaceFiles(paths, deps.sandboxUser === undefined ? {} : { owner: deps.sandboxUser }),
    processes,
    sessions,
    state: new SandboxState(sessions, processes, paths.root),
    terminals: new TerminalManager({
      baseEnv: deps.baseEnv,
      root: deps.root,
      resolveDir: (dir) => server.hostDir(dir),
      ...(deps.sandboxUser === undefined ? {} : { user: deps.sandboxUser }),
      workCgroups: deps.workCgroups ?? [],
      ...(deps.maxTerminals === undefined ? {} : { maxTerminals: deps.maxTerminals }),
      budget,
      clock: deps.clock,
      logger: deps.logger,
    }),
    baseEnv: deps.baseEnv,
    buildEnv: buildSessionEnv,
    spawn,
    childStdio,
    clock: deps.clock,
    logger: deps.logger,
    linkSecret: deps.linkSecret,
    ...(deps.resumeSecretFile === undefined ? {} : { resumeSecretFile: deps.resumeSecretFile }),
    ...(deps.handshakeTimeoutMs === undefined ? {} : { handshakeTimeoutMs: deps.handshakeTimeoutMs }),
    ...(deps.oomCheck === undefined ? {} : { oomCheck: deps.oomCheck }),
    ...(deps.tcpLingerMs === undefined ? {} : { tcpLingerMs: deps.tcpLingerMs }),
  })
  return { server, sessions }
}
