// Tools on sandboxes themselves: create, list, destroy, and a one-shot isolated exec.
import { Sandbox } from '@conch/sdk'
import { z } from 'zod'
import { defineTool } from './conch-tool.ts'
import { OutputBudget } from './output-budget.ts'
import { commandArg, sandboxArg } from './tool-arguments.ts'

/** An idle time in ms, or null for never; absent: the runner's default. */
function lifetimeArg(description: string) {
  return z.number().int().positive().nullable().optional().describe(`${description} null: never.`)
}

/** sandbox_create. */
export const sandboxCreate = defineTool({
  name: 'sandbox_create',
  title: 'Create a sandbox',
  description:
    'Creates an isolated Linux sandbox with bash and an empty /workspace, and returns its id. Pass the id to every other tool. ' +
    'Destroy it with sandbox_destroy when done. Unused, it hibernates after hibernateAfterMs (the next call wakes it with its files and shell state; background processes restart) ' +
    'and is destroyed after idleTimeoutMs; a running command or a process_start with keepAlive keeps it awake. Each defaults to the runner setting; null: never.',
  input: {
    env: z.record(z.string(), z.string()).optional().describe('Environment variables of every session.'),
    idleTimeoutMs: lifetimeArg('Destroy the sandbox after this many milliseconds unused.'),
    hibernateAfterMs: lifetimeArg(
      'Hibernate (snapshot and stop) the sandbox after this many milliseconds unused; shorter than idleTimeoutMs.',
    ),
    sessionIdleTimeoutMs: lifetimeArg(
      'Delete a session other than default after this many milliseconds with no client, command or output.',
    ),
    metadata: z.record(z.string(), z.string()).optional().describe('Labels returned by sandbox_list.'),
  },
  hints: {},
  async execute(args, context) {
    const sb = await Sandbox.create({
      ...context.client.connectOptions,
      ...(args.env === undefined ? {} : { env: args.env }),
      ...(args.idleTimeoutMs === undefined ? {} : { idleTimeoutMs: args.idleTimeoutMs }),
      ...(args.hibernateAfterMs === undefined ? {} : { hibernateAfterMs: args.hibernateAfterMs }),
      ...(args.sessionIdleTimeoutMs === undefined ? {} : { sessionIdleTimeoutMs: args.sessionIdleTimeoutMs }),
      ...(args.metadata === undefined ? {} : { metadata: args.metadata }),
    })
    context.client.adopt(sb)
    const { isolation, workdir } = sb.info
    return {
      text: `created sandbox ${sb.id} (${isolation} isolation, workspace ${workdir})`,
      structured: { sandbox: sb.id, isolation, workdir },
    }
  },
})

/** sandbox_list. */
export const sandboxList = defineTool({
  name: 'sandbox_list',
  title: 'List sandboxes',
  description: 'Lists the sandboxes on the runner with their status, isolation and labels.',
  input: {},
  hints: { readOnly: true },
  async execute(_args, context) {
    const list = await Sandbox.list(context.client.connectOptions)
    const sandboxes = list.map((s) => ({
      id: s.id,
      status: s.status,
      isolation: s.isolation,
      createdAt: s.createdAt,
      metadata: s.metadata,
    }))
    return {
      text: sandboxes.length === 0 ? 'no sandboxes' : JSON.stringify(sandboxes, null, 2),
      structured: { sandboxes },
    }
  },
})

/** sandbox_destroy. */
export const sandboxDestroy = defineTool({
  name: 'sandbox_destroy',
  title: 'Destroy a sandbox',
  description: 'Destroys a sandbox: its shells, processes and workspace are gone for good.',
  input: { sandbox: sandboxArg },
  hints: { destructive: true, idempotent: true },
  async execute(args, context) {
    const sb = await context.client.sandbox(args.sandbox)
    context.client.forget(args.sandbox)
    await sb.destroy()
    return { text: `destroyed sandbox ${args.sandbox}` }
  },
})

/** exec: a fresh process, no session state. */
export const exec = defineTool({
  name: 'exec',
  title: 'Run a command in a fresh process',
  description:
    "Runs `bash -c command` in a new process of the sandbox, isolated from the sessions' state: nothing it sets carries over. Use shell_run for work that builds on earlier commands.",
  input: {
    sandbox: sandboxArg,
    command: commandArg,
    cwd: z.string().optional().describe('Working directory; default: the workspace.'),
    env: z.record(z.string(), z.string()).optional().describe('Extra environment variables.'),
    timeoutMs: z
      .number()
      .int()
      .positive()
      .optional()
      .describe('Stop the command after this many milliseconds.'),
  },
  hints: {},
  async execute(args, context) {
    const sb = await context.client.sandbox(args.sandbox)
    const r = await sb.exec(args.command, {
      ...(args.cwd === undefined ? {} : { cwd: args.cwd }),
      ...(args.env === undefined ? {} : { env: args.env }),
      ...(args.timeoutMs === undefined ? {} : { timeoutMs: args.timeoutMs }),
      ...(context.signal ? { signal: context.signal } : {}),
    })
    const stdout = OutputBudget.fit(r.stdout, context.outputBudgetBytes)
    const stderr = OutputBudget.fit(r.stderr, context.outputBudgetBytes)
    const status = r.timedOut ? `timed out after ${r.durationMs} ms` : `exit code ${r.exitCode}`
    const text = [status, stdout && `stdout:\n${stdout}`, stderr && `stderr:\n${stderr}`]
      .filter(Boolean)
      .join('\n')
    return {
      text,
      structured: {
        exitCode: r.exitCode,
        timedOut: r.timedOut,
        durationMs: r.durationMs,
        stdout,
        stderr,
        stdoutBytes: r.stdoutBytes,
        stderrBytes: r.stderrBytes,
      },
    }
  },
})
