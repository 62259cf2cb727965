// One tool an agent can call, defined once and independent of any agent framework: its name,
// the text a model reads to decide when to use it, a zod input shape, and what it does with the
// conch SDK. The MCP server and the framework adapters are mappings of these definitions.
import { ConchError } from '@conch/sdk'
import type { z } from 'zod'
import type { ConchClient } from './conch-client.ts'

/** What a tool call gives back: text for the model, and structured data for programs. */
export interface ToolOutcome {
  /** What the model reads. */
  text: string
  /** The same facts as data, for clients that read them. */
  structured?: Record<string, unknown>
  /** The call failed in a way the model can correct; `text` says how. */
  isError?: boolean
}

/** A running call's progress: bytes of output so far and the latest lines. */
export interface ToolProgress {
  progress: number
  message: string
}

/** What a tool's body runs with besides its arguments. */
export interface ToolRunContext {
  /** The caller's conch client. */
  readonly client: ConchClient
  /** Bytes of each output stream an outcome carries (head and tail). */
  readonly outputBudgetBytes: number
  /** Aborted when the caller cancels the call: a running command is interrupted. */
  readonly signal?: AbortSignal | undefined
  /** Called about once a second by long calls, when the caller wants progress. */
  readonly onProgress?: ((progress: ToolProgress) => void) | undefined
}

/** Hints for clients, as MCP's tool annotations mean them. */
export interface ToolHints {
  readOnly?: boolean
  destructive?: boolean
  idempotent?: boolean
}

/** A tool: schema, description and body. */
export interface ConchTool<Shape extends z.ZodRawShape = z.ZodRawShape> {
  readonly name: string
  readonly title: string
  readonly description: string
  readonly input: Shape
  /** Shape of `ToolOutcome.structured`, when it is always the same. */
  readonly output?: z.ZodRawShape
  readonly hints: ToolHints
  execute(args: z.output<z.ZodObject<Shape>>, context: ToolRunContext): Promise<ToolOutcome>
}

/** Declares a tool with its argument types inferred from its input shape. */
export function defineTool<Shape extends z.ZodRawShape>(tool: ConchTool<Shape>): ConchTool<Shape> {
  return tool
}

/** Runs a tool; a thrown error becomes an error outcome with the code and what to do. */
export async function runTool<Shape extends z.ZodRawShape>(
  tool: ConchTool<Shape>,
  args: z.output<z.ZodObject<Shape>>,
  context: ToolRunContext,
): Promise<ToolOutcome> {
  try {
    return await tool.execute(args, context)
  } catch (err) {
    return { text: errorText(err), isError: true }
  }
}

/** The line a model reads for an error: the conch error code and its message. */
export function errorText(err: unknown): string {
  if (err instanceof ConchError) return `${err.code}: ${err.message}`
  return `error: ${err instanceof Error ? err.message : String(err)}`
}
