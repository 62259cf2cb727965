// `conch mcp` / `conch-mcp`: serves conch's MCP tools over stdio (desktop clients start it as a
// subprocess) or streamable HTTP (remote agents). stdout belongs to the MCP protocol under stdio,
// so everything this command says goes to stderr.
import { parseArgs } from 'node:util'
import { DEFAULT_OUTPUT_BUDGET_BYTES } from '@conch/ai'
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js'
import { startMcpHttpServer } from './http-server.ts'
import { createConchMcpServer } from './mcp-server.ts'

/** A runner started for this command when no URL was given. */
export interface EmbeddedRunner {
  readonly url: string
  readonly apiKey: string
  close(): Promise<void>
}

/** What the command needs from its host program. */
export interface McpCliHost {
  /** Starts a runner on loopback; absent when this program cannot. */
  startEmbeddedRunner?: () => Promise<EmbeddedRunner>
  /** Version reported to MCP clients. */
  version?: string
}

/** The command's flags; each also reads the environment variable named in its help. */
const OPTIONS = {
  url: { type: 'string' },
  'api-key': { type: 'string' },
  token: { type: 'string' },
  transport: { type: 'string', default: 'stdio' },
  host: { type: 'string', default: '127.0.0.1' },
  port: { type: 'string', default: '7879' },
  'output-budget': { type: 'string', default: String(DEFAULT_OUTPUT_BUDGET_BYTES) },
  help: { type: 'boolean', short: 'h' },
} as const

/** The help text. */
export const MCP_HELP = `conch mcp: conch's persistent shells as Model Context Protocol tools

Usage: conch mcp [flags]

  --url <url>            runner URL (env CONCH_URL); without it, a runner is started on loopback
  --api-key <key>        runner API key (env CONCH_API_KEY)
  --token <token>        a sandbox token instead of the key (env CONCH_TOKEN)
  --transport <t>        stdio (default) for desktop clients, or http for remote agents
  --host <host>          http: interface to listen on (default 127.0.0.1)
  --port <port>          http: port (default 7879); callers send Authorization: Bearer <key or token>
  --output-budget <n>    bytes of each output stream a tool result keeps, head and tail (default ${DEFAULT_OUTPUT_BUDGET_BYTES})
  -h, --help             this help
`

/** A mistake in the command line; its message says what to type. */
export class McpUsageError extends Error {
  override name = 'McpUsageError'
}

/** Runs the command until stdin closes (stdio) or a signal (http). */
export async function runMcpCli(argv: readonly string[], host: McpCliHost = {}): Promise<void> {
  let values: ReturnType<typeof parse>
  try {
    values = parse(argv)
  } catch (err) {
    throw new McpUsageError(`${(err as Error).message} (conch mcp --help lists the flags)`)
  }
  if (values.help) {
    process.stdout.write(MCP_HELP)
    return
  }
  const transport = values.transport
  if (transport !== 'stdio' && transport !== 'http') {
    throw new McpUsageError(`--transport is stdio or http, not "${transport}"`)
  }
  const budget = Number(values['output-budget'])
  if (!Number.isInteger(budget) || budget < 1024) {
    throw new McpUsageError(
      `--output-budget is a whole number of bytes, at least 1024, not "${values['output-budget']}"`,
    )
  }
  const port = Number(values.port)
  if (!Number.isInteger(port) || port < 0 || port > 65_535) {
    throw new McpUsageError(`--port is a port number (0-65535), not "${values.port}"`)
  }

  let url = values.url ?? process.env.CONCH_URL
  let apiKey = values['api-key'] ?? process.env.CONCH_API_KEY
  const token = values.token ?? process.env.CONCH_TOKEN
  let embedded: EmbeddedRunner | undefined
  if (url === undefined) {
    if (!host.startEmbeddedRunner) throw new McpUsageError('--url is required (or set CONCH_URL)')
    embedded = await host.startEmbeddedRunner()
    url = embedded.url
    apiKey = embedded.apiKey
    process.stderr.write(`conch mcp: started a runner at ${url}\n`)
  } else if (transport === 'stdio' && apiKey === undefined && token === undefined) {
    throw new McpUsageError('--api-key or --token is required with --url (or set CONCH_API_KEY)')
  }

  const common = { url, outputBudgetBytes: budget, ...(host.version ? { version: host.version } : {}) }
  const stopped = new Promise<void>((resolve) => {
    process.once('SIGINT', resolve)
    process.once('SIGTERM', resolve)
  })
  try {
    if (transport === 'stdio') {
      const mcp = createConchMcpServer({ ...common, apiKey, token })
      const closed = new Promise<void>((resolve) => {
        process.stdin.once('end', resolve)
        process.stdin.once('close', resolve)
      })
      await mcp.server.connect(new StdioServerTransport())
      await Promise.race([closed, stopped])
      await mcp.close()
    } else {
      const server = await startMcpHttpServer({ ...common, host: values.host, port })
      process.stderr.write(`conch mcp listening on ${server.url}\n`)
      await stopped
      await server.close()
    }
  } finally {
    await embedded?.close()
  }
}

function parse(argv: readonly string[]) {
  return parseArgs({ args: [...argv], options: OPTIONS, strict: true, allowPositionals: false }).values
}
