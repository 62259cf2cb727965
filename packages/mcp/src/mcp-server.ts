// One MCP server for one caller: conch's tools and resources over the caller's conch client.
// stdio serves one caller for the process's life; streamable HTTP makes one per MCP session.
import { ConchClient, type ConchClientOptions, DEFAULT_OUTPUT_BUDGET_BYTES } from '@conch/ai'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { registerConchTools } from './mcp-tools.ts'
import { registerSandboxResources } from './sandbox-resources.ts'

/** How to build a conch MCP server. */
export interface ConchMcpServerOptions extends ConchClientOptions {
  /** Bytes of each output stream a tool result carries, head and tail kept. */
  outputBudgetBytes?: number
  /** Reported to clients as the server's version. */
  version?: string
}

/** An MCP server and the conch client it uses; `close` closes both. */
export interface ConchMcpServer {
  readonly server: McpServer
  readonly client: ConchClient
  close(): Promise<void>
}

const INSTRUCTIONS =
  'conch gives you persistent bash shells in isolated sandboxes. Create a sandbox with sandbox_create, ' +
  'then run commands with shell_run: each session keeps its state (cwd, variables, functions) between calls, ' +
  'like a terminal. Use process_start for servers and watchers, file_read/file_edit for files, and ' +
  'sandbox_destroy when done. An unused sandbox hibernates and wakes on the next call (background ' +
  'processes restart); process_start with keepAlive holds it awake for a long job.'

/** Builds the server with every conch tool registered. */
export function createConchMcpServer(options: ConchMcpServerOptions): ConchMcpServer {
  const client = new ConchClient(options)
  const server = new McpServer(
    { name: 'conch', version: options.version ?? '0.1.0' },
    { instructions: INSTRUCTIONS, capabilities: { tools: {}, resources: {}, logging: {} } },
  )
  const outputBudgetBytes = options.outputBudgetBytes ?? DEFAULT_OUTPUT_BUDGET_BYTES
  registerConchTools(server, client, outputBudgetBytes)
  registerSandboxResources(server, client, outputBudgetBytes)
  return {
    server,
    client,
    async close() {
      client.close()
      await server.close()
    },
  }
}
