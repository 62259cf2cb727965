// Preview hosts through the router: `<port>-<sandbox id>.<preview domain>` (the runner's
// `preview-host.ts`) is forwarded, Host and path unchanged, to the shard its id names; the runner
// then serves that sandbox's port. Hosts are case-insensitive, so the id arrives lowercased and
// its shard is found by matching the lowercased encoded shard names of the table (`conch-0` is
// `sb_conchx0z…`). A Host under the domain that does not parse, or names no shard of the table,
// is refused here and never forwarded; a Host outside the domain is ordinary API traffic.
import { ConfigError } from './config-error.ts'
import { RouterError } from './router-error.ts'
import type { SandboxTarget } from './sandbox-target.ts'
import type { Shard, ShardTable } from './shard-table.ts'

const LABEL = /^([1-9][0-9]{0,4})-(sb_[a-z0-9]{8,40})$/

/** `sb_<encoded shard>z`, lowercased: how a preview host's id starts on `shard`. */
const lowerPrefix = (shard: string): string => `sb_${shard.replaceAll('-', 'x')}z`

/** The shards whose lowercased id prefix matches `id` with at least 8 random characters after. */
function shardsOfLowerId(id: string, shards: ShardTable): Shard[] {
  return [...shards.values()].filter((s) => {
    const prefix = lowerPrefix(s.name)
    return id.startsWith(prefix) && id.length - prefix.length >= 8
  })
}

/**
 * Throws ConfigError when two shard names make the same lowercased id prefix ambiguous (`a` and
 * `az…`), so that every preview host names at most one shard of the table.
 */
export function checkPreviewShards(shards: ShardTable): void {
  const names = [...shards.keys()]
  for (const a of names) {
    for (const b of names) {
      if (a !== b && lowerPrefix(b).startsWith(lowerPrefix(a))) {
        throw new ConfigError(
          `shards ${a} and ${b} cannot share a preview domain: a lowercased preview host cannot tell their sandbox ids apart; rename one`,
        )
      }
    }
  }
}

/**
 * The target of a request for `url` whose Host is `hostHeader`, or null when the Host is not
 * under `domain` (or no domain is configured). Throws RouterError for a preview Host that does
 * not parse or a request target that is not a path (BAD_REQUEST), or a Host that names no shard
 * of the table (SANDBOX_NOT_FOUND).
 */
export function previewTarget(
  hostHeader: string | undefined,
  url: string,
  domain: string | null,
  shards: ShardTable,
): SandboxTarget | null {
  if (!domain || hostHeader === undefined) return null
  const host = hostHeader.toLowerCase().replace(/:[0-9]{1,5}$/, '')
  if (!host.endsWith(`.${domain}`)) return null
  const label = host.slice(0, -domain.length - 1)
  const match = LABEL.exec(label)
  if (!match || Number(match[1]) > 65_535) {
    throw new RouterError(
      'BAD_REQUEST',
      `the host ${JSON.stringify(hostHeader.slice(0, 200))} is not a preview host; preview hosts look like 3000-sb_xxxxxxxxxxxx.${domain}`,
    )
  }
  const found = shardsOfLowerId(match[2]!, shards)
  if (found.length !== 1) {
    throw new RouterError(
      'SANDBOX_NOT_FOUND',
      `sandbox ${match[2]} not found: its id names no runner behind this router; use the preview URL that POST /v1/sandboxes/:id/exposed-ports/:port returned`,
      { details: { sandboxId: match[2]! } },
    )
  }
  if (!url.startsWith('/')) {
    throw new RouterError('BAD_REQUEST', 'the request target is not a path; send a path such as /')
  }
  return { sandboxId: match[2]!, shard: found[0]!, pathAndQuery: url, host: hostHeader }
}
