import { isAbsolute, join } from 'node:path'
import { parseArgs } from 'node:util'
import { ShardName } from '@conch/protocol'
import { z } from 'zod'
import { ConfigError } from './config-error.ts'
import { DRIVERS_BY_STRENGTH } from './driver-choice.ts'
import { RunnerLimits } from './runner-limits.ts'
import { LOG_FORMATS, LOG_LEVELS, SETTINGS, type Setting } from './runner-settings.ts'

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
  /** JSON file of the SSH hosts the ssh driver may run sandboxes on (see drivers/ssh-hosts.ts). */
  sshHosts: z.string().min(1).optional(),
  /** Allow the local driver (no isolation) while the runner runs as root; for development only. */
  unsafeLocal: z
    .enum(['1', 'true', '0', 'false'], { error: 'use 1 or true to allow, 0 or false to refuse' })
    .transform((v) => v === '1' || v === 'true')
    .default(false),
  /** pino log level. */
  logLevel: z.enum(LOG_LEVELS).default('info'),
  /** Log format: `auto` is `pretty` when stderr is a terminal, else `json` (pino lines). */
  logFormat: z.enum(LOG_FORMATS).default('auto'),
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
  /** Allow `public: true` port exposures. */
  allowPublicPorts: z
    .enum(['1', 'true', '0', 'false'], { error: 'use 1 or true to allow, 0 or false to refuse' })
    .transform((v) => v === '1' || v === 'true')
    .default(false),
  /** Wildcard domain for host-based preview URLs; none by default. */
  previewDomain: z
    .string()
    .regex(
      /^(?=.{1,200}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$/,
      'a DNS name such as preview.example.com',
    )
    .optional(),
  /** CIDRs in special ranges that egress may reach; none by default. */
  egressPermit: z
    .string()
    .default('')
    .transform((s) =>
      s
        .split(',')
        .map((c) => c.trim())
        .filter((c) => c.length > 0),
    )
    .pipe(z.array(z.union([z.cidrv4(), z.cidrv6()]))),
  /** File of egress credentials (name → host, headers) the proxy may inject; none by default. */
  egressCredentials: z.string().min(1).optional(),
  /** PEM file of CAs trusted for upstream TLS of injected requests, besides Node's roots. */
  egressUpstreamCa: z.string().min(1).optional(),
  /** Shard name written into every new sandbox id, so a router can forward by id; none by default. */
  shard: ShardName.optional(),
  /**
   * Sandboxes kept started ahead of demand per driver, so a create with default options is
   * answered at once (warm-pool.ts); 0 disables the pool. Two: each costs an idle agent
   * (tens of MB), and two cover a create burst while the pool refills in the background.
   */
  warmPool: z.coerce.number().int().min(0).max(64).default(2),
  /** The API key; when absent one is generated on first start and stored only as a hash. */
  apiKey: z.string().min(16, 'the API key must be at least 16 characters').optional(),
  /** Limits. */
  limits: RunnerLimits,
})
/** Runner configuration. */
export type RunnerConfig = z.infer<typeof RunnerConfig>

const SEE_HELP = 'run conch runner --help for every flag and the values it takes'

/** parseArgs options: every flag, typed so that a switch takes no value. */
const PARSE_OPTIONS = Object.fromEntries(
  SETTINGS.filter((s) => s.flag !== null).map((s) => [
    s.flag!.slice(2),
    { type: s.boolean ? ('boolean' as const) : ('string' as const) },
  ]),
)

/** The values every setting takes when nothing sets it. */
export function defaultConfig(): RunnerConfig {
  return RunnerConfig.parse({ limits: {} })
}

/**
 * Parses flags (`--name value`, `--name=value`, or `--name` alone for a switch; tokenised by
 * `node:util` parseArgs) over `CONCH_*` variables over defaults.
 * A relative state dir is resolved against `cwd`. Throws ConfigError with one line that names
 * each bad setting, with its value, and what it accepts.
 */
export function parseRunnerConfig(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
  cwd: string,
): RunnerConfig {
  const raw: Record<string, unknown> = {}
  const limits: Record<string, unknown> = {}
  const origin = new Map<string, { from: string; setting: Setting }>()
  const put = (s: Setting, value: string, from: string): void => {
    if (s.limit) limits[s.key] = value
    else raw[s.key] = value
    origin.set(s.limit ? `limits.${s.key}` : s.key, { from, setting: s })
  }
  for (const s of SETTINGS) {
    const value = env[s.env]
    if (value !== undefined && value !== '') put(s, value, `${s.env}=${s.key === 'apiKey' ? '…' : value}`)
  }
  const { tokens } = parseArgs({
    args: [...argv],
    options: PARSE_OPTIONS,
    strict: false,
    allowPositionals: true,
    tokens: true,
  })
  for (const token of tokens) {
    if (token.kind === 'option-terminator') continue
    if (token.kind === 'positional') {
      throw new ConfigError(`unexpected argument "${token.value}"; ${SEE_HELP}`)
    }
    const setting = SETTINGS.find((s) => s.flag === `--${token.name}` && token.rawName.startsWith('--'))
    if (!setting) throw new ConfigError(`unknown flag ${token.rawName}; ${SEE_HELP}`)
    let value = token.value
    if (setting.boolean) value ??= '1'
    else if (value === undefined || (!token.inlineValue && value.startsWith('-') && value.length > 1)) {
      throw new ConfigError(`flag ${token.rawName} needs a value (${setting.value}: ${setting.accepts})`)
    }
    put(setting, value, `${token.rawName} ${value}`)
  }
  raw.limits = limits
  const parsed = RunnerConfig.safeParse(raw)
  if (!parsed.success) {
    const problems = new Map<string, string>()
    for (const issue of parsed.error.issues) {
      const path = issue.path.join('.')
      const found = origin.get(path) ?? origin.get(String(issue.path[0]))
      const key = found?.from ?? path
      if (problems.has(key)) continue
      problems.set(
        key,
        found ? `${found.from} is not valid: use ${found.setting.accepts}` : `${path}: ${issue.message}`,
      )
    }
    throw new ConfigError(`${[...problems.values()].join('; ')}; ${SEE_HELP}`)
  }
  const config = parsed.data
  if (!isAbsolute(config.stateDir)) config.stateDir = join(cwd, config.stateDir)
  if (config.sshHosts !== undefined && !isAbsolute(config.sshHosts))
    config.sshHosts = join(cwd, config.sshHosts)
  return config
}
