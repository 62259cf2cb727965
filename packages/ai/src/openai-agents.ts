// conch for the OpenAI Agents SDK (`@openai/agents`): `conchShell` implements the SDK's `Shell`
// interface, so its `shellTool` (the model's native shell tool) runs commands in a conch
// session, where `cd` and variables persist between calls; `conchAgentTools` gives the other
// conch tools (files, background processes, interrupt) as function tools, bound to one sandbox.
import type { Sandbox } from '@conch/sdk'
import { type FunctionTool, type Shell, type ShellAction, type ShellResult, tool } from '@openai/agents'
import { z } from 'zod'
import { ConchClient } from './conch-client.ts'
import { runTool } from './conch-tool.ts'
import { SANDBOX_TOOLS } from './conch-tools.ts'
import { DEFAULT_OUTPUT_BUDGET_BYTES, OutputBudget } from './output-budget.ts'

/** Where the shell runs. */
export interface ConchShellOptions {
  /** The sandbox. */
  sandbox: Sandbox
  /** The session whose bash runs the commands; default `default`. */
  session?: string
  /** Bytes of each output stream kept per command when the model sets no maxOutputLength. */
  outputBudgetBytes?: number
}

/**
 * A `Shell` for `shellTool({ shell })`: each action's commands run in turn in one persistent
 * session. A command that times out is stopped (the shell is kept) and the rest are not run.
 *
 * @example
 * ```ts
 * const agent = new Agent({ name: 'dev', tools: [shellTool({ shell: conchShell({ sandbox: sb }) })] })
 * ```
 */
export function conchShell(options: ConchShellOptions): Shell {
  const client = ConchClient.bound(options.sandbox)
  const session = options.session ?? 'default'
  return {
    async run(action: ShellAction): Promise<ShellResult> {
      const budget = action.maxOutputLength ?? options.outputBudgetBytes ?? DEFAULT_OUTPUT_BUDGET_BYTES
      const shell = await client.shell(options.sandbox.id, session)
      const output: ShellResult['output'] = []
      for (const command of action.commands) {
        const r = await shell.run(
          command,
          action.timeoutMs === undefined ? {} : { timeoutMs: action.timeoutMs },
        )
        output.push({
          stdout: OutputBudget.fit(r.stdout, budget),
          stderr: OutputBudget.fit(r.stderr, budget),
          outcome: r.timedOut ? { type: 'timeout' } : { type: 'exit', exitCode: r.exitCode },
        })
        if (r.timedOut) break
      }
      return { output, maxOutputLength: budget }
    },
  }
}

/** Which tools, and their output budget. */
export interface ConchAgentToolsOptions {
  sandbox: Sandbox
  outputBudgetBytes?: number
  /** Only these tools (by name); default all but `shell_run`, which `conchShell` covers. */
  only?: readonly string[]
}

/** conch's sandbox tools as function tools of the Agents SDK, bound to one sandbox. */
export function conchAgentTools(options: ConchAgentToolsOptions): FunctionTool[] {
  const client = ConchClient.bound(options.sandbox)
  const outputBudgetBytes = options.outputBudgetBytes ?? DEFAULT_OUTPUT_BUDGET_BYTES
  const wanted = (name: string): boolean =>
    options.only ? options.only.includes(name) : name !== 'shell_run'
  return SANDBOX_TOOLS.filter((t) => wanted(t.name)).map((definition) => {
    const { sandbox: _bound, ...input } = definition.input
    const schema = z.object(input)
    const json = z.toJSONSchema(schema, { io: 'input' }) as {
      properties?: Record<string, never>
      required?: string[]
    }
    return tool({
      name: definition.name,
      description: definition.description,
      // Strict mode refuses optional fields, which these tools have (with defaults): the SDK takes
      // a non-strict JSON schema, and the arguments are parsed with the zod schema here.
      strict: false,
      parameters: {
        type: 'object',
        properties: json.properties ?? {},
        required: json.required ?? [],
        additionalProperties: true,
      },
      execute: async (args: unknown) => {
        const parsed = schema.safeParse(args)
        if (!parsed.success) return `invalid arguments: ${z.prettifyError(parsed.error)}`
        const outcome = await runTool(definition, { ...parsed.data, sandbox: options.sandbox.id } as never, {
          client,
          outputBudgetBytes,
        })
        return outcome.text
      },
    }) as unknown as FunctionTool
  })
}
