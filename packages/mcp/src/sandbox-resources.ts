// MCP resources: a session's recent scrollback and a workspace file, addressed by URI, so a
// client can attach them to a model's context without a tool call. Both are read-only views;
// reading the scrollback attaches and detaches a shell without running anything.
import { type ConchClient, OutputBudget } from '@conch/ai'
import { OutputLostError } from '@conch/sdk'
import { type McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js'
import type { ReadResourceResult } from '@modelcontextprotocol/sdk/types.js'

/** URI of a session's scrollback. */
export const SCROLLBACK_URI = 'conch://sandboxes/{sandbox}/sessions/{session}/scrollback'
/** URI of a workspace file; the path is relative to the workspace. */
export const FILE_URI = 'conch://sandboxes/{sandbox}/files/{+path}'

/** Registers the scrollback and file resources. */
export function registerSandboxResources(
  server: McpServer,
  client: ConchClient,
  outputBudgetBytes: number,
): void {
  server.registerResource(
    'session-scrollback',
    new ResourceTemplate(SCROLLBACK_URI, {
      list: async () => {
        const resources = []
        for (const info of await client.listSandboxes()) {
          const sb = await client.sandbox(info.id)
          for (const session of await sb.listSessions()) {
            resources.push({
              uri: `conch://sandboxes/${info.id}/sessions/${session.id}/scrollback`,
              name: `${info.id} ${session.id} scrollback`,
              mimeType: 'text/plain',
            })
          }
        }
        return { resources }
      },
    }),
    {
      title: "A session's recent output",
      description: `The last ${outputBudgetBytes} bytes a session's shell wrote (stdout and stderr interleaved as they arrived).`,
      mimeType: 'text/plain',
    },
    async (uri, variables): Promise<ReadResourceResult> => {
      const sb = await client.sandbox(String(variables.sandbox))
      const sessionId = String(variables.session)
      const session = await sb.getSession(sessionId)
      const budget = new OutputBudget(outputBudgetBytes)
      const decoder = new TextDecoder()
      const attach = (offset: number) =>
        sb.reattachShell(sessionId, {
          offset,
          onOutput: (o) => budget.push(decoder.decode(o.data, { stream: true })),
        })
      const from = Math.max(0, session.info.offset - outputBudgetBytes)
      const shell = await attach(from).catch((err: unknown) => {
        // Older output was evicted between the two calls: read from what is still kept.
        if (err instanceof OutputLostError && err.earliestOffset !== undefined)
          return attach(err.earliestOffset)
        throw err
      })
      shell.close()
      return { contents: [{ uri: uri.href, mimeType: 'text/plain', text: budget.finish().text }] }
    },
  )

  server.registerResource(
    'workspace-file',
    new ResourceTemplate(FILE_URI, { list: undefined }),
    {
      title: 'A workspace file',
      description: 'A text file of a sandbox, by its path relative to the workspace.',
      mimeType: 'text/plain',
    },
    async (uri, variables): Promise<ReadResourceResult> => {
      const sb = await client.sandbox(String(variables.sandbox))
      const text = await sb.files.read(String(variables.path))
      return { contents: [{ uri: uri.href, mimeType: 'text/plain', text }] }
    },
  )
}
