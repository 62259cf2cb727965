// The fixed set of runner shards a router forwards to: each shard name maps to one base URL,
// decided by the operator at startup (an explicit list, or a StatefulSet pattern expanded to a
// count). Requests are forwarded only to these URLs: a client's input picks an entry of the
// table by name and never becomes part of a host, port or scheme.
import { ShardName } from '@conch/protocol'
import { ConfigError } from './config-error.ts'

/** One runner behind the router. */
export interface Shard {
  /** The shard name the runner writes into its sandbox ids (`--shard`). */
  readonly name: string
  /** The runner's base URL (`http://host:port`), without a path. */
  readonly url: URL
}

/** The shards by name. */
export type ShardTable = ReadonlyMap<string, Shard>

function parseBaseUrl(name: string, text: string): URL {
  let url: URL
  try {
    url = new URL(text)
  } catch {
    throw new ConfigError(`shard ${name}: "${text}" is not a URL; write http://host:port`)
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ConfigError(`shard ${name}: ${text} must be an http:// or https:// URL`)
  }
  if (
    (url.pathname !== '/' && url.pathname !== '') ||
    url.search ||
    url.hash ||
    url.username ||
    url.password
  ) {
    throw new ConfigError(
      `shard ${name}: ${text} must be a bare origin (http://host:port), without a path, query or credentials`,
    )
  }
  return url
}

function checkName(name: string): string {
  const parsed = ShardName.safeParse(name)
  if (!parsed.success) {
    throw new ConfigError(`shard "${name}": ${parsed.error.issues[0]?.message ?? 'not a shard name'}`)
  }
  return parsed.data
}

/**
 * Builds the table from `name=url` entries (comma-separated) and/or a pattern such as
 * `conch-{n}=http://conch-{n}.conch-headless:7878` expanded for `n` in `0..count-1`.
 * Throws ConfigError for a bad name, a bad URL, a duplicate or an empty table.
 */
export function buildShardTable(input: {
  shards?: string | undefined
  pattern?: string | undefined
  count?: number | undefined
}): ShardTable {
  const entries: [string, string][] = []
  for (const item of (input.shards ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0)) {
    const eq = item.indexOf('=')
    if (eq <= 0)
      throw new ConfigError(`shard entry "${item}" must be name=url, like conch-0=http://10.0.0.5:7878`)
    entries.push([item.slice(0, eq), item.slice(eq + 1)])
  }
  if (input.pattern) {
    const eq = input.pattern.indexOf('=')
    if (eq <= 0 || !input.pattern.includes('{n}')) {
      throw new ConfigError(
        'the shard pattern must be name-{n}=url-with-{n}, like conch-{n}=http://conch-{n}.conch-headless:7878',
      )
    }
    if (!input.count || input.count < 1)
      throw new ConfigError('a shard pattern needs --shard-count of at least 1')
    for (let n = 0; n < input.count; n++) {
      entries.push([
        input.pattern.slice(0, eq).replaceAll('{n}', String(n)),
        input.pattern.slice(eq + 1).replaceAll('{n}', String(n)),
      ])
    }
  }
  if (entries.length === 0) {
    throw new ConfigError('no shards: pass --shards name=url,... or --shard-pattern with --shard-count')
  }
  const table = new Map<string, Shard>()
  for (const [rawName, rawUrl] of entries) {
    const name = checkName(rawName)
    if (table.has(name)) throw new ConfigError(`shard ${name} is listed twice`)
    table.set(name, { name, url: parseBaseUrl(name, rawUrl) })
  }
  return table
}
