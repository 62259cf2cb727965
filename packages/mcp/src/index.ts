// @conch/mcp: conch's persistent shells as Model Context Protocol tools.
export { type ConchMcpHttpServer, type McpHttpOptions, startMcpHttpServer } from './http-server.ts'
export { type EmbeddedRunner, MCP_HELP, type McpCliHost, McpUsageError, runMcpCli } from './mcp-cli.ts'
export {
  type ConchMcpServer,
  type ConchMcpServerOptions,
  createConchMcpServer,
} from './mcp-server.ts'
