import { isAbsolute, join } from 'node:path'
import { z } from 'zod'
import { RunnerLimits } from './runner-limits.ts'

/** The port `conch runner` listens on when none is given. */
export const DEFAULT_PORT = 7878

/** Configuration of the `conch runner` process, from flags and `CONCH_*` variables. */
export const RunnerConfig = z.object({
  /** Interface to listen on. */
  host: z.string().min(1).default('127.0.0.1'),
  /** Port; 0 picks a free one. */
  port: z.coerce.number().int().min(0).max(65_535).default(DEFAULT_PORT),
  /** Folder holding the database, sandbox roots and agent logs. */
  stateDir: z.string().min(1).default('.conch'),
  /** Default sandbox driver; `auto` is `namespace` where the host supports it, else `local`. */
  driver: z.enum(['auto', 'local', 'namespace']).default('auto'),
  /** pino log level. */
  logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** Comma-separated origins whose browser pages may call the REST API (`*` for any); none by default. */
  corsOrigins: z
    .string()
    .default('')
    .transform((s) =>
      s
        .split(',')
        .map((o) => o.trim())
        .filter((o) => o.length > 0),
    )
    .pipe(z.array(z.union([z.literal('*'), z.url({ protocol: /^https?$/ })]))),
  /** The API key; when absent one is generated on first start and stored only as a hash. */
  apiKey: z.string().min(16, 'the API key must be at least 16 characters').optional(),
  /** Limits. */
  limits: RunnerLimits,
})
/** Runner configuration. */
export type RunnerConfig = z.infer<typeof RunnerConfig>

/** Bad flags or environment; the message names the setting and what it accepts. */
export class ConfigError extends Error {
  /** Creates a config error with a message for the operator. */
  constructor(message: string) {
    super(message)
    this.name = 'ConfigError'
  }
}

interface Setting {
  key: string
  limit: boolean
  flag: string
  env: string
}

const TOP = ['host', 'port', 'stateDir', 'driver', 'logLevel', 'corsOrigins', 'apiKey'] as const
const LIMIT_KEYS = Object.keys(RunnerLimits.shape)

const kebab = (s: string): string => s.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)
const snake = (s: string): string => s.replace(/[A-Z]/g, (c) => `_${c}`).toUpperCase()

const SETTINGS: Setting[] = [
  ...TOP.filter((k) => k !== 'apiKey').map((key) => ({
    key,
    limit: false,
    flag: `--${kebab(key)}`,
    env: `CONCH_${snake(key)}`,
  })),
  { key: 'apiKey', limit: false, flag: '', env: 'CONCH_API_KEY' },
  ...LIMIT_KEYS.map((key) => ({ key, limit: true, flag: `--${kebab(key)}`, env: `CONCH_${snake(key)}` })),
]

/** One line per flag, for `conch runner --help`. */
export function configUsage(): string {
  return SETTINGS.filter((s) => s.flag)
    .map((s) => `  ${s.flag.padEnd(30)} env ${s.env}`)
    .join('\n')
}

/**
 * Parses flags (`--name value` or `--name=value`) over `CONCH_*` variables over defaults.
 * A relative state dir is resolved against `cwd`. Throws ConfigError naming the bad setting.
 */
export function parseRunnerConfig(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
  cwd: string,
): RunnerConfig {
  const raw: Record<string, unknown> = {}
  const limits: Record<string, unknown> = {}
  const origin = new Map<string, string>()
  const put = (s: Setting, value: string, from: string): void => {
    if (s.limit) limits[s.key] = value
    else raw[s.key] = value
    origin.set(s.limit ? `limits.${s.key}` : s.key, from)
  }
  for (const s of SETTINGS) {
    const value = env[s.env]
    if (value !== undefined && value !== '') put(s, value, `${s.env}=${s.key === 'apiKey' ? '…' : value}`)
  }
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    if (!arg.startsWith('--')) throw new ConfigError(`unexpected argument "${arg}"; run conch runner --help`)
    const eq = arg.indexOf('=')
    const name = eq > 0 ? arg.slice(0, eq) : arg
    const setting = SETTINGS.find((s) => s.flag === name)
    if (!setting) throw new ConfigError(`unknown flag ${name}; run conch runner --help for the flags`)
    const value = eq > 0 ? arg.slice(eq + 1) : argv[++i]
    if (value === undefined || (eq < 0 && value.startsWith('--'))) {
      throw new ConfigError(`flag ${name} needs a value`)
    }
    put(setting, value, `${name} ${value}`)
  }
  raw.limits = limits
  const parsed = RunnerConfig.safeParse(raw)
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => {
      const path = issue.path.join('.')
      const from = origin.get(path) ?? origin.get(String(issue.path[0]))
      return `${from ?? path}: ${issue.message}`
    })
    throw new ConfigError(`invalid runner configuration:\n  ${problems.join('\n  ')}`)
  }
  const config = parsed.data
  if (!isAbsolute(config.stateDir)) config.stateDir = join(cwd, config.stateDir)
  return config
}
