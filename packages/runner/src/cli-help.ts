// The text `conch --help` prints: the commands, then every runner setting with its flag, its
// variable, what it does, its default and the values it takes (from runner-settings.ts).
import { defaultConfig } from './runner-config.ts'
import { SETTINGS, type Setting } from './runner-settings.ts'

/** Width the descriptions are wrapped to. */
const WIDTH = 96
/** Indent of a setting's description under its flag. */
const INDENT = '      '

function wrap(text: string): string[] {
  const lines: string[] = []
  let line = ''
  for (const word of text.split(' ')) {
    if (line && INDENT.length + line.length + 1 + word.length > WIDTH) {
      lines.push(line)
      line = word
    } else line = line ? `${line} ${word}` : word
  }
  if (line) lines.push(line)
  return lines.map((l) => `${INDENT}${l}`)
}

function defaultOf(setting: Setting): string {
  if (setting.defaultText) return setting.defaultText
  const defaults = defaultConfig()
  const value: unknown = setting.limit
    ? defaults.limits[setting.key as keyof typeof defaults.limits]
    : defaults[setting.key as keyof typeof defaults]
  return String(value)
}

function describe(setting: Setting): string {
  const name = setting.flag ? `${setting.flag}${setting.value ? ` ${setting.value}` : ''}` : setting.env
  const head = setting.flag
    ? `  ${name.padEnd(36)} env ${setting.env}`
    : `  ${name.padEnd(36)} (variable only)`
  const values = setting.values ? ` Values: ${setting.values}.` : ''
  return [head, ...wrap(`${setting.summary} Default: ${defaultOf(setting)}.${values}`)].join('\n')
}

/** The help for `conch`, `conch --help` and `conch runner --help`. */
export function cliHelp(version: string): string {
  const server = SETTINGS.filter((s) => !s.limit)
  const limits = SETTINGS.filter((s) => s.limit)
  return `conch ${version}: persistent shell sessions for AI agents, in sandboxes you run yourself.

usage: conch runner [flags]     serve the conch API (REST + WebSocket) and run sandboxes
       conch mcp [flags]        serve conch's shells as MCP tools (conch mcp --help)
       conch --help, -h         print this help
       conch --version, -v      print the version

Every flag can also be set by its environment variable; a flag wins over the variable, and the
variable over the default. Stop the runner with Ctrl-C (SIGINT) or SIGTERM: sandboxes keep
running for its next start.

Server:
${server.map(describe).join('\n')}

Limits (each returns a typed error when reached):
${limits.map(describe).join('\n')}

Exit codes: 0 stopped, 1 could not run (state dir in use, port taken), 2 bad flags, variables,
state dir or host setup. The docs site's "CLI and environment" page has the same settings.
`
}
