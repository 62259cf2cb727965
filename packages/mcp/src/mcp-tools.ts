// conch's tool definitions (from @conch/ai) as MCP tools: the input shape becomes the JSON
// schema clients see, hints become annotations, a progress token turns on progress
// notifications, cancellation aborts the call, and an outcome becomes a CallToolResult.
import { CONCH_TOOLS, type ConchClient, runTool, type ToolOutcome } from '@conch/ai'
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'

/** Registers every conch tool on `server`, acting with `client`. */
export function registerConchTools(server: McpServer, client: ConchClient, outputBudgetBytes: number): void {
  for (const tool of CONCH_TOOLS) {
    server.registerTool(
      tool.name,
      {
        title: tool.title,
        description: tool.description,
        inputSchema: tool.input,
        ...(tool.output ? { outputSchema: tool.output } : {}),
        annotations: {
          readOnlyHint: tool.hints.readOnly ?? false,
          destructiveHint: tool.hints.destructive ?? false,
          idempotentHint: tool.hints.idempotent ?? false,
          // Every tool acts inside conch's sandboxes, not on the open world.
          openWorldHint: false,
        },
      },
      async (args: Record<string, unknown>, extra) => {
        const token = extra._meta?.progressToken
        const outcome = await runTool(tool, args as never, {
          client,
          outputBudgetBytes,
          signal: extra.signal,
          onProgress:
            token === undefined
              ? undefined
              : ({ progress, message }) => {
                  void extra
                    .sendNotification({
                      method: 'notifications/progress',
                      params: { progressToken: token, progress, message },
                    })
                    .catch(() => {})
                },
        })
        return toCallToolResult(outcome)
      },
    )
  }
}

function toCallToolResult(outcome: ToolOutcome): CallToolResult {
  return {
    content: [{ type: 'text', text: outcome.text }],
    ...(outcome.structured === undefined ? {} : { structuredContent: outcome.structured }),
    ...(outcome.isError ? { isError: true } : {}),
  }
}
