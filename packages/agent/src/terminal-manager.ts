// The terminals of a sandbox: opens programs on ptys, attaches runner channels to them, and
// answers the `terminal.*` methods.
//
// A channel attached to a terminal carries its output (replay from an offset, `scrollback_end`,
// then live data, then `end` with the exit code when the program ends) and, the other way,
// `data` frames from the runner, which are the terminal's input. Several channels may attach to
// one terminal: all see the same output and all may type. A channel closing detaches it only;
// a terminal ends when its program exits or `terminal.close` is called. Running terminals are
// limited per sandbox; an ended terminal keeps its scrollback (and its exit code) until it is
// closed, and the oldest ended ones are forgotten when more than the limit pile up.
import { randomBytes } from 'node:crypto'
import type { AgentParams, AgentResultOf, TerminalAttachment, TerminalInfo } from '@conch/protocol'
import { assertNever, LIMITS } from '@conch/protocol/zod-free'
import type { AgentChannel } from './agent-channel.ts'
import { AgentError } from './agent-error.ts'
import type { Clock } from './clock.ts'
import type { LogEvent } from './log-records.ts'
import type { Logger } from './logger.ts'
import { loadPty, type Pty } from './pty-loader.ts'
import { PtyTerminal } from './pty-terminal.ts'
import type { ScrollbackBudget } from './scrollback-budget.ts'
import type { MethodContext } from './session-service.ts'
import type { SandboxUser } from './spawner.ts'

/** The `terminal.*` methods of the agent protocol. */
export type TerminalMethod = Extract<keyof AgentMethodsShape, `terminal.${string}`>
type AgentMethodsShape = typeof import('@conch/protocol').AGENT_METHODS

/** What the terminal manager is built from. */
export interface TerminalManagerOptions {
  /** The sandbox's base environment. */
  baseEnv: Readonly<Record<string, string>>
  /** Maps a caller's directory to the agent's view (`/workspace/...` → the root). */
  resolveDir: (dir: string) => string
  /** The workspace root, where terminals start by default. */
  root: string
  /** The user programs run as. */
  user?: SandboxUser
  /** cgroup.procs files every program is moved into. */
  workCgroups?: readonly string[]
  /** Most running terminals. */
  maxTerminals?: number
  /** Scrollback per terminal. */
  scrollbackBytes?: number
  /** The agent's shared scrollback budget. */
  budget?: ScrollbackBudget
  /** node-pty; loaded on first use when absent. */
  pty?: Pty
  /** Time. */
  clock: Clock
  /** Logging. */
  logger: Logger
}

/** Terminals by id, with the method handlers. */
export class TerminalManager {
  readonly #options: TerminalManagerOptions
  readonly #terminals = new Map<string, PtyTerminal>()

  /** A manager with no terminals. */
  constructor(options: TerminalManagerOptions) {
    this.#options = options
  }

  /** Handles one `terminal.*` call with parsed params. */
  async handle<M extends TerminalMethod>(
    method: M,
    params: AgentParams<M>,
    context: MethodContext,
  ): Promise<AgentResultOf<M>> {
    const m = method as TerminalMethod
    switch (m) {
      case 'terminal.open':
        return this.#open(params as AgentParams<'terminal.open'>) as Promise<AgentResultOf<M>>
      case 'terminal.list':
        return { terminals: [...this.#terminals.values()].map((t) => t.info()) } as AgentResultOf<M>
      case 'terminal.get':
        return this.#get((params as AgentParams<'terminal.get'>).terminal).info() as AgentResultOf<M>
      case 'terminal.attach':
        return this.#attach(params as AgentParams<'terminal.attach'>, context) as AgentResultOf<M>
      case 'terminal.resize': {
        const p = params as AgentParams<'terminal.resize'>
        const terminal = this.#get(p.terminal)
        terminal.resize(p.cols, p.rows)
        return terminal.info() as AgentResultOf<M>
      }
      case 'terminal.signal': {
        const p = params as AgentParams<'terminal.signal'>
        this.#get(p.terminal).signal(p.signal)
        return {} as AgentResultOf<M>
      }
      case 'terminal.close': {
        const p = params as AgentParams<'terminal.close'>
        this.#get(p.terminal).close()
        this.#terminals.delete(p.terminal)
        return {} as AgentResultOf<M>
      }
      default:
        return assertNever(m)
    }
  }

  /** Ends every terminal (agent shutdown). */
  closeAll(): void {
    for (const terminal of this.#terminals.values()) terminal.close()
    this.#terminals.clear()
  }

  /** How many terminals are running. */
  get running(): number {
    let n = 0
    for (const t of this.#terminals.values()) if (t.running) n++
    return n
  }

  async #open(p: AgentParams<'terminal.open'>): Promise<TerminalInfo> {
    const o = this.#options
    const max = o.maxTerminals ?? LIMITS.maxTerminalsPerSandbox
    if (this.running >= max) {
      throw new AgentError(
        'TOO_MANY_TERMINALS',
        `the sandbox already has ${max} terminals running (the limit)`,
        { details: { limit: max, value: this.running } },
      )
    }
    this.#forgetEnded(max)
    const pty = o.pty ?? loadPty()
    const env: Record<string, string> = { ...o.baseEnv, TERM: 'xterm-256color', ...p.env }
    const cwd = p.cwd === undefined ? o.root : o.resolveDir(p.cwd)
    const command = p.command ?? ['bash', '-l']
    const id = `t_${randomBytes(10).toString('hex').slice(0, 16)}`
    let terminal: PtyTerminal
    try {
      terminal = new PtyTerminal({
        id,
        command,
        cols: p.cols ?? 80,
        rows: p.rows ?? 24,
        cwd,
        env,
        pty,
        ...(o.user ? { user: o.user } : {}),
        workCgroups: o.workCgroups ?? [],
        scrollbackBytes: o.scrollbackBytes ?? LIMITS.terminalScrollbackBytes,
        ...(o.budget ? { budget: o.budget } : {}),
        clock: o.clock,
        logger: o.logger,
      })
    } catch (error) {
      if (error instanceof AgentError) throw error
      throw new AgentError(
        'BAD_REQUEST',
        `could not start ${JSON.stringify(command[0])} on a terminal in ${cwd}: ${error instanceof Error ? error.message : String(error)}; check the command and cwd`,
      )
    }
    this.#terminals.set(id, terminal)
    return terminal.info()
  }

  /** Forgets the oldest ended terminals so at most `max` ended ones are kept. */
  #forgetEnded(max: number): void {
    const ended = [...this.#terminals.values()].filter((t) => !t.running)
    for (const t of ended.slice(0, Math.max(0, ended.length - max + 1))) {
      t.close()
      this.#terminals.delete(t.id)
    }
  }

  #get(id: string): PtyTerminal {
    const terminal = this.#terminals.get(id)
    if (!terminal) {
      throw new AgentError('TERMINAL_NOT_FOUND', `terminal ${id} does not exist in this sandbox`, {
        details: { terminal: id.slice(0, 64) },
      })
    }
    return terminal
  }

  #attach(p: AgentParams<'terminal.attach'>, context: MethodContext): TerminalAttachment {
    const terminal = this.#get(p.terminal)
    const from = p.offset ?? terminal.log.startOffset
    // Throws OUTPUT_LOST (evicted) or BAD_REQUEST (past the end) before the channel exists.
    terminal.log.readFrom(from)
    const channel = context.channel(p.ch)
    attachTerminalChannel(terminal, channel, from)
    void pumpInput(terminal, channel)
    return { ...terminal.info(), inputWindow: LIMITS.channelWindowBytes }
  }
}

/** Forwards a terminal's log to a channel from `from`, under the channel's credit. */
function attachTerminalChannel(terminal: PtyTerminal, channel: AgentChannel, from: number): void {
  type Outgoing = LogEvent | { type: 'scrollback_end'; offset: number }
  const queue: Outgoing[] = []
  let paused = false
  const send = (e: Outgoing): boolean => {
    switch (e.type) {
      case 'shell_out':
      case 'shell_err':
        return channel.data(e.offset, e.data)
      case 'scrollback_end':
        channel.send(e)
        return true
      case 'shell_closed':
        channel.end({ type: 'end', exitCode: e.code, timedOut: false, durationMs: 0 })
        return true
      case 'shell_start':
      case 'shell_exit':
        return true
      default:
        return assertNever(e)
    }
  }
  const pump = (): void => {
    while (!paused && queue.length > 0 && !channel.done) {
      if (!send(queue.shift()!)) paused = true
    }
  }
  const { replay, subscription } = terminal.log.subscribe(from, (event) => {
    queue.push(event)
    pump()
    return !paused
  })
  const closedInReplay = replay.some((e) => e.type === 'shell_closed')
  const ordered: Outgoing[] = replay.filter((e) => e.type !== 'shell_closed')
  ordered.push({ type: 'scrollback_end', offset: terminal.log.endOffset })
  if (closedInReplay) ordered.push(...replay.filter((e) => e.type === 'shell_closed'))
  queue.push(...ordered)
  channel.onResume(() => {
    paused = false
    pump()
    if (!paused) subscription.resume()
  })
  channel.onClose(() => subscription.close())
  pump()
}

/**
 * Writes the channel's `data` frames to the terminal as input until the channel closes, and
 * returns the runner's credit for each once the pty has taken it (see `inputWindow`).
 */
async function pumpInput(terminal: PtyTerminal, channel: AgentChannel): Promise<void> {
  for await (const chunk of channel.uploads()) {
    const taken = () => channel.release(chunk.byteLength)
    if (chunk.byteLength > LIMITS.maxTerminalInputBytes) taken()
    else terminal.write(chunk, taken)
  }
}
