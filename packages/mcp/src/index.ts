// @conch/mcp: conch's persistent shells as Model Context Protocol tools.
export { ConchClient, type ConchClientOptions } from './conch-client.ts'
export { type ConchMcpHttpServer, type McpHttpOptions, startMcpHttpServer } from './http-server.ts'
export { type EmbeddedRunner, MCP_HELP, type McpCliHost, McpUsageError, runMcpCli } from './mcp-cli.ts'
export {
  type ConchMcpServer,
  type ConchMcpServerOptions,
  createConchMcpServer,
  DEFAULT_OUTPUT_BUDGET_BYTES,
} from './mcp-server.ts'
export { OutputBudget } from './output-budget.ts'
