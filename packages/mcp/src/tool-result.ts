// How a tool's outcome reaches the model: text it reads, structured content a client can use,
// and errors as tool results (not protocol errors) so the model sees the code and what to do.
import { ConchError } from '@conch/sdk'
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'

/**
 * A result: `text` for the model, `structured` for clients that read it; `isError` for a mistake
 * the model can correct (the text says how).
 */
export function toolResult(
  text: string,
  structured?: Record<string, unknown>,
  isError = false,
): CallToolResult {
  return {
    content: [{ type: 'text', text }],
    ...(structured === undefined ? {} : { structuredContent: structured }),
    ...(isError ? { isError: true } : {}),
  }
}

/** A failed call as the model sees it: the error code and the message that says what to do. */
export function toolError(err: unknown): CallToolResult {
  const text =
    err instanceof ConchError
      ? `${err.code}: ${err.message}`
      : err instanceof Error
        ? `error: ${err.message}`
        : `error: ${String(err)}`
  return { isError: true, content: [{ type: 'text', text }] }
}

/** Runs a tool body and turns any thrown error into an error result. */
export async function guarded(body: () => Promise<CallToolResult>): Promise<CallToolResult> {
  try {
    return await body()
  } catch (err) {
    return toolError(err)
  }
}
