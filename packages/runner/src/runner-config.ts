import { isAbsolute, join } from 'node:path'
import { ShardName } from '@conch/protocol'
import { z } from 'zod'
import { ConfigError } from './config-error.ts'
import { DRIVERS_BY_STRENGTH } from './driver-choice.ts'
import { RunnerLimits } from './runner-limits.ts'

export { ConfigError } from './config-error.ts'

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
  /** Default sandbox driver; `auto` is the strongest allowed driver (see driver-choice.ts). */
  driver: z.enum(['auto', ...DRIVERS_BY_STRENGTH]).default('auto'),
  /** Comma-separated drivers a create request may choose; by default every isolating driver that works here. */
  drivers: z
    .string()
    .transform((s) =>
      s
        .split(',')
        .map((d) => d.trim())
        .filter((d) => d.length > 0),
    )
    .pipe(
      z
        .array(z.enum(DRIVERS_BY_STRENGTH, { error: `drivers are ${DRIVERS_BY_STRENGTH.join(', ')}` }))
        .min(1, `name at least one of ${DRIVERS_BY_STRENGTH.join(', ')}`),
    )
    .optional(),
  /** Allow the local driver (no isolation) while the runner runs as root; for development only. */
  unsafeLocal: z
    .enum(['1', 'true', '0', 'false'], { error: 'use 1 or true to allow, 0 or false to refuse' })
    .transform((v) => v === '1' || v === 'true')
    .default(false),
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
  /** Shard name written into every new sandbox id, so a router can forward by id; none by default. */
  shard: ShardName.optional(),
  /** The API key; when absent one is generated on first start and stored only as a hash. */
  apiKey: z.string().min(16, 'the API key must be at least 16 characters').optional(),
  /** Limits. */
  limits: RunnerLimits,
})
/** Runner configuration. */
export type RunnerConfig = z.infer<typeof RunnerConfig>

interface Setting {
  key: string
  limit: boolean
  /** A switch: the flag alone means true. */
  boolean: boolean
  flag: string
  env: string
}

const TOP = [
  'host',
  'port',
  'stateDir',
  'driver',
  'drivers',
  'unsafeLocal',
  'logLevel',
  'corsOrigins',
  'shard',
  'apiKey',
] as const
const BOOLEAN_KEYS: ReadonlySet<string> = new Set(['unsafeLocal'])
const LIMIT_KEYS = Object.keys(RunnerLimits.shape)

const kebab = (s: string): string => s.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)
const snake = (s: string): string => s.replace(/[A-Z]/g, (c) => `_${c}`).toUpperCase()

const SETTINGS: Setting[] = [
  ...TOP.filter((k) => k !== 'apiKey').map((key) => ({
    key,
    limit: false,
    boolean: BOOLEAN_KEYS.has(key),
    flag: `--${kebab(key)}`,
    env: `CONCH_${snake(key)}`,
  })),
  { key: 'apiKey', limit: false, boolean: false, flag: '', env: 'CONCH_API_KEY' },
  ...LIMIT_KEYS.map((key) => ({
    key,
    limit: true,
    boolean: false,
    flag: `--${kebab(key)}`,
    env: `CONCH_${snake(key)}`,
  })),
]

/** One line per flag, for `conch runner --help`. */
export function configUsage(): string {
  return SETTINGS.filter((s) => s.flag)
    .map((s) => `  ${s.flag.padEnd(30)} env ${s.env}`)
    .join('\n')
}

/**
 * Parses flags (`--name value`, `--name=value`, or `--name` alone for a switch) over `CONCH_*`
 * variables over defaults.
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
    const value = eq > 0 ? arg.slice(eq + 1) : setting.boolean ? '1' : argv[++i]
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
