// Tools on background processes: start one (a server, a watcher), read its output since an
// offset, and stop it.
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { z } from 'zod'
import { OutputBudget } from './output-budget.ts'
import type { ToolContext } from './tool-context.ts'
import { guarded, toolResult } from './tool-result.ts'

const sandbox = z.string().describe('Sandbox id, as returned by sandbox_create or sandbox_list.')
/** How long process_kill waits for the process to end before it answers. */
const KILL_WAIT_MS = 5_000

const processId = z.string().describe('Process id, as returned by process_start.')

/** Registers process_start, process_output and process_kill. */
export function registerProcessTools(server: McpServer, context: ToolContext): void {
  server.registerTool(
    'process_start',
    {
      title: 'Start a background process',
      description:
        'Starts a long-running command (a dev server, a watcher, a build) in the background and returns its id at once. Read its output with process_output and stop it with process_kill.',
      inputSchema: {
        sandbox,
        command: z.string().min(1).describe('The bash command line.'),
        cwd: z.string().optional().describe('Working directory; default: the workspace.'),
        env: z.record(z.string(), z.string()).optional().describe('Extra environment variables.'),
      },
      annotations: { openWorldHint: false },
    },
    (args) =>
      guarded(async () => {
        const sb = await context.client.sandbox(args.sandbox)
        const proc = await sb.startProcess(args.command, {
          ...(args.cwd === undefined ? {} : { cwd: args.cwd }),
          ...(args.env === undefined ? {} : { env: args.env }),
        })
        return toolResult(`started process ${proc.id} (pid ${proc.pid})`, { process: proc.id, pid: proc.pid })
      }),
  )

  server.registerTool(
    'process_output',
    {
      title: 'Read a background process’s output',
      description:
        "Returns a background process's output since an offset (0: everything still kept) and its status. Pass the returned nextOffset next time to read only newer output.",
      inputSchema: {
        sandbox,
        process: processId,
        since: z.number().int().nonnegative().default(0).describe('Log offset to read from.'),
      },
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    (args) =>
      guarded(async () => {
        const sb = await context.client.sandbox(args.sandbox)
        const proc = await sb.getProcess(args.process)
        const chunk = await proc.output({ since: args.since })
        const fit = (text: string): string => {
          const budget = new OutputBudget(context.outputBudgetBytes)
          budget.push(text)
          return budget.finish().text
        }
        const stdout = fit(chunk.stdout)
        const stderr = fit(chunk.stderr)
        const exit = proc.info.exitCode === null ? '' : `, exit code ${proc.info.exitCode}`
        const text = [
          `status ${chunk.status}${exit}; nextOffset ${chunk.nextOffset}`,
          stdout && `stdout:\n${stdout}`,
          stderr && `stderr:\n${stderr}`,
        ]
          .filter(Boolean)
          .join('\n')
        return toolResult(text, { status: chunk.status, nextOffset: chunk.nextOffset, stdout, stderr })
      }),
  )

  server.registerTool(
    'process_kill',
    {
      title: 'Stop a background process',
      description:
        'Sends SIGTERM (or the given signal) to a background process and its children, SIGKILL after 3 s, and waits up to 5 s for it to end.',
      inputSchema: {
        sandbox,
        process: processId,
        signal: z.enum(['SIGTERM', 'SIGKILL', 'SIGINT', 'SIGHUP']).default('SIGTERM'),
      },
      annotations: { destructiveHint: true, idempotentHint: true, openWorldHint: false },
    },
    (args) =>
      guarded(async () => {
        const sb = await context.client.sandbox(args.sandbox)
        const proc = await sb.getProcess(args.process)
        await proc.kill(args.signal)
        const info = await proc.wait({ timeoutMs: KILL_WAIT_MS })
        return toolResult(`process ${info.id} is ${info.status}`, { process: info.id, status: info.status })
      }),
  )
}
