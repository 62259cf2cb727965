#!/usr/bin/env node
// The `conch-mcp` bin: `conch mcp` against a runner named by --url / CONCH_URL.
import { McpUsageError, runMcpCli } from './mcp-cli.ts'

runMcpCli(process.argv.slice(2)).catch((err: unknown) => {
  process.stderr.write(`conch mcp: ${err instanceof McpUsageError ? err.message : String(err)}\n`)
  process.exit(2)
})
