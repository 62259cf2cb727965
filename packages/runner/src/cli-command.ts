// What `conch <argv>` asks for: the help, the version, or a runner with its flags. Tokenised by
// `node:util` parseArgs; a mistake is a ConfigError whose one line says what to type instead.
import { parseArgs } from 'node:util'
import { ConfigError } from './config-error.ts'

/** The command line's request. */
export type CliCommand =
  | { kind: 'help' }
  | { kind: 'version' }
  | { kind: 'runner'; args: string[] }
  | { kind: 'mcp'; args: string[] }

/** The options every command takes. */
const GLOBAL_OPTIONS = {
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean', short: 'v' },
} as const

/** Which of --help and --version the arguments hold before any `--`; help wins. */
function globalFlag(args: readonly string[]): CliCommand | null {
  const { tokens } = parseArgs({
    args: [...args],
    options: GLOBAL_OPTIONS,
    strict: false,
    allowPositionals: true,
    tokens: true,
  })
  const names = new Set(tokens.flatMap((t) => (t.kind === 'option' ? [t.name] : [])))
  if (names.has('help')) return { kind: 'help' }
  if (names.has('version')) return { kind: 'version' }
  return null
}

/**
 * Reads the command: nothing, `help`, `-h` or `--help` (anywhere) is the help; `-v` or
 * `--version` the version; `runner [flags]` a runner; `mcp [flags]` the MCP server. Throws
 * ConfigError for anything else.
 */
export function parseCommand(argv: readonly string[]): CliCommand {
  const [command, ...rest] = argv
  if (command === undefined || command === 'help') return { kind: 'help' }
  // `conch mcp` parses its own flags, its --help included.
  if (command === 'mcp') return { kind: 'mcp', args: rest }
  const global = globalFlag(argv)
  if (global) return global
  if (command === 'runner') return { kind: 'runner', args: rest }
  if (command.startsWith('-')) {
    throw new ConfigError(
      `flags go after the command: conch runner ${argv.join(' ')} (conch --help lists them)`,
    )
  }
  throw new ConfigError(
    `unknown command "${command}"; the commands are runner and mcp (conch runner --help, conch mcp --help)`,
  )
}
