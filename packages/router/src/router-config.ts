// Configuration of the `conch-router` process: flags over `CONCH_ROUTER_*` variables over
// defaults. Each setting is one flag and one variable, listed by `conch-router --help`.
import { z } from 'zod'
import { ConfigError } from './config-error.ts'

/** The port `conch-router` listens on when none is given. */
export const DEFAULT_ROUTER_PORT = 7879

const positive = z.coerce.number().int().positive()

/** Configuration of the router process. */
export const RouterConfig = z.object({
  /** Interface to listen on. */
  host: z.string().min(1).default('127.0.0.1'),
  /** Port; 0 picks a free one. */
  port: z.coerce.number().int().min(0).max(65_535).default(DEFAULT_ROUTER_PORT),
  /** Comma-separated `name=url` shards. */
  shards: z.string().optional(),
  /** A `name-{n}=url-with-{n}` pattern, expanded for `n` in `0..shardCount-1`. */
  shardPattern: z.string().optional(),
  /** How many shards the pattern names (the StatefulSet's replicas). */
  shardCount: positive.optional(),
  /** pino log level. */
  logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** How often each runner's `/readyz` is read for readiness and load. */
  pollIntervalMs: positive.default(2_000),
  /** Time to connect to a runner before it counts as unavailable. */
  connectTimeoutMs: positive.default(5_000),
  /** Largest API request body forwarded (FRAME_TOO_LARGE beyond; port relay bodies stream); the runner's own cap is 8 MiB. */
  maxBodyBytes: positive.default(8 * 1024 * 1024),
  /** Largest request header block (Node answers 431 beyond). */
  maxHeaderBytes: positive.default(16 * 1024),
  /** Largest WebSocket message relayed, either way. */
  maxFrameBytes: positive.default(16 * 1024 * 1024),
  /** Time a client has to send a request's headers; then the connection is closed. */
  headersTimeoutMs: positive.default(10_000),
  /** Time a client has to send a whole request. */
  requestTimeoutMs: positive.default(60_000),
  /** Time an idle keep-alive connection stays open. */
  keepAliveTimeoutMs: positive.default(72_000),
  /** Open client connections at once (RATE_LIMITED beyond). */
  maxConnections: positive.default(4_096),
  /** The runners' wildcard preview domain (their --preview-domain); none by default. */
  previewDomain: z
    .string()
    .regex(
      /^(?=.{1,200}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$/,
      "a DNS name such as preview.example.com, the same as the runners' --preview-domain",
    )
    .optional(),
})
/** Router configuration after defaults. */
export type RouterConfig = z.infer<typeof RouterConfig>

const KEYS = Object.keys(RouterConfig.shape) as (keyof RouterConfig)[]
const kebab = (s: string): string => s.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)
const snake = (s: string): string => s.replace(/[A-Z]/g, (c) => `_${c}`).toUpperCase()
const flagOf = (key: string): string => `--${kebab(key)}`
const envOf = (key: string): string => `CONCH_ROUTER_${snake(key)}`

/** One line per flag, for `conch-router --help`. */
export function routerConfigUsage(): string {
  return KEYS.map((k) => `  ${flagOf(k).padEnd(26)} env ${envOf(k)}`).join('\n')
}

/** Parses flags (`--name value` or `--name=value`) over `CONCH_ROUTER_*` variables over defaults. */
export function parseRouterConfig(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
): RouterConfig {
  const raw: Record<string, string> = {}
  const origin = new Map<string, string>()
  for (const key of KEYS) {
    const value = env[envOf(key)]
    if (value !== undefined && value !== '') {
      raw[key] = value
      origin.set(key, `${envOf(key)}=${value}`)
    }
  }
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    if (!arg.startsWith('--')) throw new ConfigError(`unexpected argument "${arg}"; run conch-router --help`)
    const eq = arg.indexOf('=')
    const name = eq > 0 ? arg.slice(0, eq) : arg
    const key = KEYS.find((k) => flagOf(k) === name)
    if (!key) throw new ConfigError(`unknown flag ${name}; run conch-router --help for the flags`)
    const value = eq > 0 ? arg.slice(eq + 1) : argv[++i]
    if (value === undefined || (eq < 0 && value.startsWith('--')))
      throw new ConfigError(`flag ${name} needs a value`)
    raw[key] = value
    origin.set(key, `${name} ${value}`)
  }
  const parsed = RouterConfig.safeParse(raw)
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => {
      const key = String(issue.path[0])
      return `${origin.get(key) ?? key}: ${issue.message}`
    })
    throw new ConfigError(`invalid router configuration:\n  ${problems.join('\n  ')}`)
  }
  return parsed.data
}
