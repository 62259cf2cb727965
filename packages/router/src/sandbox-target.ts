// Which shard a request path goes to. A path under `/v1/sandboxes/:id` is forwarded to the
// shard its id names, unchanged; nothing else of the path is interpreted. A path is refused
// before anything is forwarded when its id is malformed or names no shard of the table, or
// when a segment is `.`/`..` (literally or percent-encoded) or hides a `/` or `\`: the runner
// would not resolve them, but a path the router forwards is one it can read plainly.
import { SandboxId, shardOfSandboxId } from '@conch/protocol'
import { RouterError } from './router-error.ts'
import type { Shard, ShardTable } from './shard-table.ts'

/** A request bound for one sandbox's runner. */
export interface SandboxTarget {
  /** The sandbox id from the path. */
  readonly sandboxId: string
  /** The shard that holds it. */
  readonly shard: Shard
  /** Path and query to request from the runner (the client's, as received). */
  readonly pathAndQuery: string
  /** The client's Host, sent unchanged instead of the shard's (a preview host only). */
  readonly host?: string
}

const PREFIX = '/v1/sandboxes/'

function decodeSegment(segment: string): string | null {
  try {
    return decodeURIComponent(segment)
  } catch {
    return null
  }
}

/**
 * The target of a request for `url` (path and query as the client sent it), or null when the
 * path is not under `/v1/sandboxes/:id`. Throws RouterError for a hostile or unknown id.
 */
export function sandboxTarget(url: string, shards: ShardTable): SandboxTarget | null {
  const q = url.indexOf('?')
  const path = q < 0 ? url : url.slice(0, q)
  if (!path.startsWith(PREFIX)) return null
  const segments = path.slice(PREFIX.length).split('/')
  for (const segment of segments) {
    const decoded = decodeSegment(segment)
    if (decoded === null || decoded === '.' || decoded === '..' || /[/\\]/.test(decoded)) {
      throw new RouterError(
        'BAD_REQUEST',
        `the path ${JSON.stringify(path.slice(0, 200))} has a segment that is not a plain name; send the path the API reference shows`,
      )
    }
  }
  const id = decodeSegment(segments[0]!) ?? ''
  if (!SandboxId.safeParse(id).success) {
    throw new RouterError(
      'BAD_REQUEST',
      `"${id.slice(0, 64)}" is not a sandbox id; sandbox ids look like sb_xxxxxxxxxxxx`,
    )
  }
  const name = shardOfSandboxId(id)
  const shard = name === null ? undefined : shards.get(name)
  if (!shard) {
    throw new RouterError(
      'SANDBOX_NOT_FOUND',
      `sandbox ${id} not found: its id names no runner behind this router; use an id that POST /v1/sandboxes returned here`,
      { details: { sandboxId: id } },
    )
  }
  return { sandboxId: id, shard, pathAndQuery: url }
}
