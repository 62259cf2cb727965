// Tools on sandboxes themselves: create, list, destroy, and a one-shot isolated exec.
import { Sandbox } from '@conch/sdk'
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { z } from 'zod'
import { OutputBudget } from './output-budget.ts'
import type { ToolContext } from './tool-context.ts'
import { guarded, toolResult } from './tool-result.ts'

const sandbox = z.string().describe('Sandbox id, as returned by sandbox_create or sandbox_list.')

/** Registers sandbox_create, sandbox_list, sandbox_destroy and exec. */
export function registerSandboxTools(server: McpServer, context: ToolContext): void {
  server.registerTool(
    'sandbox_create',
    {
      title: 'Create a sandbox',
      description:
        'Creates an isolated Linux sandbox with bash and an empty /workspace, and returns its id. Pass the id to every other tool. ' +
        'Destroy it with sandbox_destroy when done; idleTimeoutMs destroys it after that long without use.',
      inputSchema: {
        env: z.record(z.string(), z.string()).optional().describe('Environment variables of every session.'),
        idleTimeoutMs: z
          .number()
          .int()
          .positive()
          .optional()
          .describe('Destroy the sandbox after this many milliseconds without API activity.'),
        metadata: z.record(z.string(), z.string()).optional().describe('Labels returned by sandbox_list.'),
      },
      annotations: { openWorldHint: false },
    },
    (args) =>
      guarded(async () => {
        const client = context.client
        const sb = await Sandbox.create({
          ...client.connectOptions,
          ...(args.env === undefined ? {} : { env: args.env }),
          ...(args.idleTimeoutMs === undefined ? {} : { idleTimeoutMs: args.idleTimeoutMs }),
          ...(args.metadata === undefined ? {} : { metadata: args.metadata }),
        })
        client.adopt(sb)
        const info = sb.info
        return toolResult(
          `created sandbox ${sb.id} (${info.isolation} isolation, workspace ${info.workdir})`,
          { sandbox: sb.id, isolation: info.isolation, workdir: info.workdir },
        )
      }),
  )

  server.registerTool(
    'sandbox_list',
    {
      title: 'List sandboxes',
      description: 'Lists the sandboxes on the runner with their status, isolation and labels.',
      inputSchema: {},
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    () =>
      guarded(async () => {
        const list = await Sandbox.list(context.client.connectOptions)
        const sandboxes = list.map((s) => ({
          id: s.id,
          status: s.status,
          isolation: s.isolation,
          createdAt: s.createdAt,
          metadata: s.metadata,
        }))
        return toolResult(sandboxes.length === 0 ? 'no sandboxes' : JSON.stringify(sandboxes, null, 2), {
          sandboxes,
        })
      }),
  )

  server.registerTool(
    'sandbox_destroy',
    {
      title: 'Destroy a sandbox',
      description: 'Destroys a sandbox: its shells, processes and workspace are gone for good.',
      inputSchema: { sandbox },
      annotations: { destructiveHint: true, idempotentHint: true, openWorldHint: false },
    },
    (args) =>
      guarded(async () => {
        const client = context.client
        const sb = await client.sandbox(args.sandbox)
        client.forget(args.sandbox)
        await sb.destroy()
        return toolResult(`destroyed sandbox ${args.sandbox}`)
      }),
  )

  server.registerTool(
    'exec',
    {
      title: 'Run a command in a fresh process',
      description:
        "Runs `bash -c command` in a new process of the sandbox, isolated from the sessions' state: nothing it sets carries over. Use shell_run for work that builds on earlier commands.",
      inputSchema: {
        sandbox,
        command: z.string().min(1).describe('The bash command line.'),
        cwd: z.string().optional().describe('Working directory; default: the workspace.'),
        env: z.record(z.string(), z.string()).optional().describe('Extra environment variables.'),
        timeoutMs: z
          .number()
          .int()
          .positive()
          .optional()
          .describe('Stop the command after this many milliseconds.'),
      },
      annotations: { openWorldHint: false },
    },
    (args, extra) =>
      guarded(async () => {
        const sb = await context.client.sandbox(args.sandbox)
        const r = await sb.exec(args.command, {
          ...(args.cwd === undefined ? {} : { cwd: args.cwd }),
          ...(args.env === undefined ? {} : { env: args.env }),
          ...(args.timeoutMs === undefined ? {} : { timeoutMs: args.timeoutMs }),
          signal: extra.signal,
        })
        const out = new OutputBudget(context.outputBudgetBytes)
        out.push(r.stdout)
        const err = new OutputBudget(context.outputBudgetBytes)
        err.push(r.stderr)
        const stdout = out.finish().text
        const stderr = err.finish().text
        const status = r.timedOut ? `timed out after ${r.durationMs} ms` : `exit code ${r.exitCode}`
        const text = [status, stdout && `stdout:\n${stdout}`, stderr && `stderr:\n${stderr}`]
          .filter(Boolean)
          .join('\n')
        return toolResult(text, {
          exitCode: r.exitCode,
          timedOut: r.timedOut,
          durationMs: r.durationMs,
          stdout,
          stderr,
          stdoutBytes: r.stdoutBytes,
          stderrBytes: r.stderrBytes,
        })
      }),
  )
}
