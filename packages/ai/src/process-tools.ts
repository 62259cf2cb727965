// Tools on background processes: start one (a server, a watcher), read its output since an
// offset, and stop it.
import { z } from 'zod'
import { defineTool } from './conch-tool.ts'
import { OutputBudget } from './output-budget.ts'
import { commandArg, sandboxArg } from './tool-arguments.ts'

/** How long process_kill waits for the process to end before it answers. */
const KILL_WAIT_MS = 5_000

const processArg = z.string().describe('Process id, as returned by process_start.')

/** process_start. */
export const processStart = defineTool({
  name: 'process_start',
  title: 'Start a background process',
  description:
    'Starts a long-running command (a dev server, a watcher, a build) in the background and returns its id at once. Read its output with process_output and stop it with process_kill. ' +
    'Pass keepAlive for a long job the sandbox must stay awake for.',
  input: {
    sandbox: sandboxArg,
    command: commandArg,
    cwd: z.string().optional().describe('Working directory; default: the workspace.'),
    env: z.record(z.string(), z.string()).optional().describe('Extra environment variables.'),
    keepAlive: z
      .boolean()
      .optional()
      .describe(
        'Keep the sandbox from hibernating or being destroyed while this process runs (capped by the runner, 24 h by default).',
      ),
  },
  hints: {},
  async execute(args, context) {
    const sb = await context.client.sandbox(args.sandbox)
    const proc = await sb.startProcess(args.command, {
      ...(args.cwd === undefined ? {} : { cwd: args.cwd }),
      ...(args.env === undefined ? {} : { env: args.env }),
      ...(args.keepAlive === undefined ? {} : { keepAlive: args.keepAlive }),
    })
    return {
      text: `started process ${proc.id} (pid ${proc.pid})`,
      structured: { process: proc.id, pid: proc.pid },
    }
  },
})

/** process_output. */
export const processOutput = defineTool({
  name: 'process_output',
  title: 'Read the output of a background process',
  description:
    "Returns a background process's output since an offset (0: everything still kept) and its status. Pass the returned nextOffset next time to read only newer output.",
  input: {
    sandbox: sandboxArg,
    process: processArg,
    since: z.number().int().nonnegative().default(0).describe('Log offset to read from.'),
  },
  hints: { readOnly: true },
  async execute(args, context) {
    const sb = await context.client.sandbox(args.sandbox)
    const proc = await sb.getProcess(args.process)
    const chunk = await proc.output({ since: args.since })
    const stdout = OutputBudget.fit(chunk.stdout, context.outputBudgetBytes)
    const stderr = OutputBudget.fit(chunk.stderr, context.outputBudgetBytes)
    const exit = proc.info.exitCode === null ? '' : `, exit code ${proc.info.exitCode}`
    const text = [
      `status ${chunk.status}${exit}; nextOffset ${chunk.nextOffset}`,
      stdout && `stdout:\n${stdout}`,
      stderr && `stderr:\n${stderr}`,
    ]
      .filter(Boolean)
      .join('\n')
    return { text, structured: { status: chunk.status, nextOffset: chunk.nextOffset, stdout, stderr } }
  },
})

/** process_kill. */
export const processKill = defineTool({
  name: 'process_kill',
  title: 'Stop a background process',
  description:
    'Sends SIGTERM (or the given signal) to a background process and its children, SIGKILL after 3 s, and waits up to 5 s for it to end.',
  input: {
    sandbox: sandboxArg,
    process: processArg,
    signal: z.enum(['SIGTERM', 'SIGKILL', 'SIGINT', 'SIGHUP']).default('SIGTERM'),
  },
  hints: { destructive: true, idempotent: true },
  async execute(args, context) {
    const sb = await context.client.sandbox(args.sandbox)
    const proc = await sb.getProcess(args.process)
    await proc.kill(args.signal)
    const info = await proc.wait({ timeoutMs: KILL_WAIT_MS })
    return {
      text: `process ${info.id} is ${info.status}`,
      structured: { process: info.id, status: info.status },
    }
  },
})
