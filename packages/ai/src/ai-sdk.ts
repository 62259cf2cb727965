// conch's tools for the Vercel AI SDK (`ai`): each a `tool()` over the same definitions the MCP
// server serves, bound to one sandbox, so the model never handles sandbox ids. A tool's result is
// the text the model reads; a failure is text too (the error code and what to do), so the model
// can correct itself instead of the loop ending.
import type { Sandbox } from '@conch/sdk'
import { type ToolSet, tool } from 'ai'
import { z } from 'zod'
import { ConchClient } from './conch-client.ts'
import { runTool } from './conch-tool.ts'
import { SANDBOX_TOOLS } from './conch-tools.ts'
import { DEFAULT_OUTPUT_BUDGET_BYTES } from './output-budget.ts'

/** How to build the tool set. */
export interface AiSdkToolsOptions {
  /** The sandbox every tool acts in. */
  sandbox: Sandbox
  /** Bytes of each output stream a result carries, head and tail kept. */
  outputBudgetBytes?: number
  /** Only these tools (by name, e.g. `['shell_run', 'file_read']`); default all. */
  only?: readonly string[]
}

/**
 * The conch tools for `generateText`/`streamText`, acting in one sandbox.
 *
 * @example
 * ```ts
 * const result = await generateText({ model, tools: conchTools({ sandbox: sb }), stopWhen: stepCountIs(20), prompt })
 * ```
 */
export function conchTools(options: AiSdkToolsOptions): ToolSet {
  const client = ConchClient.bound(options.sandbox)
  const outputBudgetBytes = options.outputBudgetBytes ?? DEFAULT_OUTPUT_BUDGET_BYTES
  const tools: ToolSet = {}
  for (const definition of SANDBOX_TOOLS) {
    if (options.only && !options.only.includes(definition.name)) continue
    const { sandbox: _bound, ...input } = definition.input
    tools[definition.name] = tool({
      title: definition.title,
      description: definition.description,
      inputSchema: z.object(input),
      execute: async (args: Record<string, unknown>, { abortSignal }) => {
        const outcome = await runTool(definition, { ...args, sandbox: options.sandbox.id } as never, {
          client,
          outputBudgetBytes,
          signal: abortSignal,
        })
        return outcome.text
      },
    })
  }
  return tools
}
