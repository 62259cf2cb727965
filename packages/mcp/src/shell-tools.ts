// Tools on a sandbox's persistent shells: run a command in a session (state carries over between
// calls), interrupt it, create and list sessions. A long run reports progress with its latest
// output lines when the client sent a progress token; a client's cancellation interrupts it.
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { z } from 'zod'
import { OutputBudget } from './output-budget.ts'
import type { ToolContext } from './tool-context.ts'
import { guarded, toolResult } from './tool-result.ts'

const sandbox = z.string().describe('Sandbox id, as returned by sandbox_create or sandbox_list.')
const session = z
  .string()
  .default('default')
  .describe(
    'Session name; each session is one bash whose state (cwd, env, functions) persists between calls.',
  )

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

/** Registers shell_run, shell_interrupt, session_create and session_list. */
export function registerShellTools(server: McpServer, context: ToolContext): void {
  server.registerTool(
    'shell_run',
    {
      title: 'Run a command in a persistent shell',
      description:
        'Runs a bash command in a session of a sandbox and returns its stdout, stderr and exit code. ' +
        'The session keeps its state between calls like a terminal: `cd`, exported variables, functions ' +
        'and aliases carry over. A command that exceeds the timeout is stopped and the shell is kept. ' +
        `Output beyond ${context.outputBudgetBytes} bytes per stream keeps its head and tail; redirect ` +
        'large output to a file and read it with file_read. stdin is empty: pass input with a pipe or a heredoc.',
      inputSchema: {
        sandbox,
        session,
        command: z.string().min(1).describe('The bash command line.'),
        timeoutMs: z
          .number()
          .int()
          .positive()
          .optional()
          .describe("Stop the command after this many milliseconds; default: the session's timeout."),
      },
      outputSchema: runOutput,
      annotations: { openWorldHint: false },
    },
    (args, extra) =>
      guarded(async () => {
        const shell = await context.client.shell(args.sandbox, args.session)
        const stdout = new OutputBudget(context.outputBudgetBytes)
        const stderr = new OutputBudget(context.outputBudgetBytes)
        const token = extra._meta?.progressToken
        const progress =
          token === undefined
            ? undefined
            : setInterval(() => {
                const lines = [stdout.lastLines(PROGRESS_LINES), stderr.lastLines(PROGRESS_LINES)]
                void extra
                  .sendNotification({
                    method: 'notifications/progress',
                    params: {
                      progressToken: token,
                      progress: stdout.totalBytes + stderr.totalBytes,
                      message: lines.filter((l) => l !== '').join('\n') || 'running',
                    },
                  })
                  .catch(() => {})
              }, PROGRESS_INTERVAL_MS)
        try {
          let exit:
            | { exitCode: number; timedOut: boolean; oomKilled: boolean; durationMs: number }
            | undefined
          const events = shell.stream(args.command, {
            signal: extra.signal,
            ...(args.timeoutMs === undefined ? {} : { timeoutMs: args.timeoutMs }),
          })
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
          return toolResult(describeRun(structured), structured)
        } finally {
          if (progress) clearInterval(progress)
        }
      }),
  )

  server.registerTool(
    'shell_interrupt',
    {
      title: 'Interrupt the running command',
      description:
        "Sends Ctrl-C to the command running in a session, as a terminal would. The shell and its state stay; the interrupted shell_run call returns with the command's exit code.",
      inputSchema: { sandbox, session },
      annotations: { idempotentHint: true, openWorldHint: false },
    },
    (args) =>
      guarded(async () => {
        const shell = await context.client.shell(args.sandbox, args.session)
        await shell.interrupt()
        return toolResult(`interrupted the command running in session ${args.session}`)
      }),
  )

  server.registerTool(
    'session_create',
    {
      title: 'Create a shell session',
      description:
        'Creates a named session (its own bash) in a sandbox, with extra environment variables and a working directory. Use it for a second, independent shell; shell_run creates sessions it does not know with defaults.',
      inputSchema: {
        sandbox,
        session: z.string().min(1).describe('Name of the new session.'),
        env: z.record(z.string(), z.string()).optional().describe('Environment variables of the session.'),
        cwd: z.string().optional().describe('Working directory; default: the workspace.'),
      },
      annotations: { openWorldHint: false },
    },
    (args) =>
      guarded(async () => {
        const sb = await context.client.sandbox(args.sandbox)
        const info = await sb.createSession({
          id: args.session,
          ...(args.env === undefined ? {} : { env: args.env }),
          ...(args.cwd === undefined ? {} : { cwd: args.cwd }),
        })
        return toolResult(`created session ${info.id}`, { session: info.id })
      }),
  )

  server.registerTool(
    'session_list',
    {
      title: 'List shell sessions',
      description:
        "Lists a sandbox's sessions with their working directories and whether a command is running.",
      inputSchema: { sandbox },
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    (args) =>
      guarded(async () => {
        const list = await (await context.client.sandbox(args.sandbox)).listSessions()
        const sessions = list.map((s) => ({
          session: s.id,
          status: s.status,
          cwd: s.cwd,
          running: s.running !== null,
          queued: s.queued,
        }))
        const lines = sessions.map(
          (s) =>
            `${s.session}\t${s.status}\t${s.cwd}\t${s.running ? `running (${s.queued} queued)` : 'idle'}`,
        )
        return toolResult(lines.join('\n'), { sessions })
      }),
  )
}

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
