// Tools on a sandbox's persistent shells: run a command in a session (state carries over between
// calls), interrupt it, create and list sessions. A long run reports progress with its latest
// output lines; cancelling the call interrupts the command.

import { ShellClosedError } from '@conch/sdk'
import { z } from 'zod'
import { defineTool, errorText, type ToolOutcome } from './conch-tool.ts'
import { OutputBudget } from './output-budget.ts'
import { commandArg, sandboxArg, sessionArg } from './tool-arguments.ts'

/** How often a running command reports progress. */
const PROGRESS_INTERVAL_MS = 1_000
/** Output lines a progress message carries. */
const PROGRESS_LINES = 5

const runOutput = {
  exitCode: z.number().int(),
  timedOut: z.boolean(),
  oomKilled: z.boolean(),
  durationMs: z.number(),
  stdout: z.string(),
  stderr: z.string(),
  stdoutBytes: z.number().int(),
  stderrBytes: z.number().int(),
}

/** shell_run: a command in a persistent session. */
export const shellRun = defineTool({
  name: 'shell_run',
  title: 'Run a command in a persistent shell',
  description:
    'Runs a bash command in a session of a sandbox and returns its stdout, stderr and exit code. ' +
    'The session keeps its state between calls like a terminal: `cd`, exported variables, functions ' +
    'and aliases carry over. A command that exceeds the timeout is stopped and the shell is kept. ' +
    'Long output keeps its head and tail; redirect large output to a file and read it with file_read. ' +
    'stdin is empty: pass input with a pipe or a heredoc.',
  input: {
    sandbox: sandboxArg,
    session: sessionArg,
    command: commandArg,
    timeoutMs: z
      .number()
      .int()
      .positive()
      .optional()
      .describe("Stop the command after this many milliseconds; default: the session's timeout."),
  },
  output: runOutput,
  hints: {},
  async execute(args, context): Promise<ToolOutcome> {
    const shell = await context.client.shell(args.sandbox, args.session)
    const stdout = new OutputBudget(context.outputBudgetBytes)
    const stderr = new OutputBudget(context.outputBudgetBytes)
    const { onProgress } = context
    const progress = onProgress
      ? setInterval(() => {
          const lines = [stdout.lastLines(PROGRESS_LINES), stderr.lastLines(PROGRESS_LINES)]
          onProgress({
            progress: stdout.totalBytes + stderr.totalBytes,
            message: lines.filter((l) => l !== '').join('\n') || 'running',
          })
        }, PROGRESS_INTERVAL_MS)
      : undefined
    try {
      let exit: { exitCode: number; timedOut: boolean; oomKilled: boolean; durationMs: number } | undefined
      const events = shell.stream(args.command, {
        ...(context.signal ? { signal: context.signal } : {}),
        ...(args.timeoutMs === undefined ? {} : { timeoutMs: args.timeoutMs }),
      })
      try {
        for await (const ev of events) {
          if (ev.type === 'stdout') stdout.push(ev.data)
          else if (ev.type === 'stderr') stderr.push(ev.data)
          else
            exit = {
              exitCode: ev.code,
              timedOut: ev.timedOut,
              oomKilled: ev.oomKilled,
              durationMs: ev.durationMs,
            }
        }
      } catch (err) {
        if (!(err instanceof ShellClosedError)) throw err
        return {
          text: `${errorText(err)}\nThe next shell_run in session ${args.session} starts a new shell there: the working directory and variables start fresh.`,
          isError: true,
        }
      }
      if (!exit) throw new Error('the run ended without an exit status')
      const out = stdout.finish()
      const err = stderr.finish()
      const structured = {
        ...exit,
        stdout: out.text,
        stderr: err.text,
        stdoutBytes: out.totalBytes,
        stderrBytes: err.totalBytes,
      }
      return { text: describeRun(structured), structured }
    } finally {
      if (progress) clearInterval(progress)
    }
  },
})

/** shell_interrupt: Ctrl-C for a session. */
export const shellInterrupt = defineTool({
  name: 'shell_interrupt',
  title: 'Interrupt the running command',
  description:
    "Sends Ctrl-C to the command running in a session, as a terminal would. The shell and its state stay; the interrupted shell_run call returns with the command's exit code.",
  input: { sandbox: sandboxArg, session: sessionArg },
  hints: { idempotent: true },
  async execute(args, context) {
    const shell = await context.client.shell(args.sandbox, args.session)
    await shell.interrupt()
    return { text: `interrupted the command running in session ${args.session}` }
  },
})

/** session_create: a second bash in the sandbox. */
export const sessionCreate = defineTool({
  name: 'session_create',
  title: 'Create a shell session',
  description:
    'Creates a named session (its own bash) in a sandbox, with extra environment variables and a working directory. Use it for a second, independent shell; shell_run creates sessions it does not know with defaults.',
  input: {
    sandbox: sandboxArg,
    session: z.string().min(1).describe('Name of the new session.'),
    env: z.record(z.string(), z.string()).optional().describe('Environment variables of the session.'),
    cwd: z.string().optional().describe('Working directory; default: the workspace.'),
  },
  hints: {},
  async execute(args, context) {
    const sb = await context.client.sandbox(args.sandbox)
    const info = await sb.createSession({
      id: args.session,
      ...(args.env === undefined ? {} : { env: args.env }),
      ...(args.cwd === undefined ? {} : { cwd: args.cwd }),
    })
    return { text: `created session ${info.id}`, structured: { session: info.id } }
  },
})

/** session_list: the sandbox's sessions. */
export const sessionList = defineTool({
  name: 'session_list',
  title: 'List shell sessions',
  description: "Lists a sandbox's sessions with their working directories and whether a command is running.",
  input: { sandbox: sandboxArg },
  hints: { readOnly: true },
  async execute(args, context) {
    const list = await (await context.client.sandbox(args.sandbox)).listSessions()
    const sessions = list.map((s) => ({
      session: s.id,
      status: s.status,
      cwd: s.cwd,
      running: s.running !== null,
      queued: s.queued,
    }))
    const lines = sessions.map(
      (s) => `${s.session}\t${s.status}\t${s.cwd}\t${s.running ? `running (${s.queued} queued)` : 'idle'}`,
    )
    return { text: lines.join('\n'), structured: { sessions } }
  },
})

/** The text a model reads for one run. */
function describeRun(r: z.infer<z.ZodObject<typeof runOutput>>): string {
  const status = r.timedOut
    ? `timed out after ${r.durationMs} ms (the shell is kept; interrupt or raise timeoutMs)`
    : r.oomKilled
      ? 'killed by the sandbox memory limit'
      : `exit code ${r.exitCode}`
  const parts = [status]
  if (r.stdout !== '') parts.push(`stdout:\n${r.stdout}`)
  if (r.stderr !== '') parts.push(`stderr:\n${r.stderr}`)
  return parts.join('\n')
}
