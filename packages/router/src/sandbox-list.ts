// `GET /v1/sandboxes` through the router: the same request (credentials and query included) to
// every shard of the table, answered with one list. A listing is complete or it is an error:
// when a shard cannot be reached the answer is RUNNER_UNAVAILABLE naming it, never a list that
// silently lacks its sandboxes; when a shard refuses (a bad key, say) its refusal is the answer.
import type { IncomingMessage, OutgoingHttpHeaders } from 'node:http'
import { z } from 'zod'
import { RouterError } from './router-error.ts'
import type { Shard } from './shard-table.ts'
import { callUpstream, type UpstreamPool } from './upstream-request.ts'

/** A runner's list answer; each sandbox is passed on as the runner wrote it. */
const ShardList = z.object({ sandboxes: z.array(z.looseObject({ createdAt: z.number().optional() })) })

/** Largest list answer read from one runner. */
const MAX_LIST_BYTES = 32 * 1024 * 1024

/** The router's answer: a status and a JSON body (or a runner's refusal as it came). */
export interface ListAnswer {
  /** HTTP status. */
  status: number
  /** Body to send. */
  body: unknown
}

async function readBody(res: IncomingMessage): Promise<string> {
  let size = 0
  const chunks: Buffer[] = []
  for await (const chunk of res) {
    size += (chunk as Buffer).length
    if (size > MAX_LIST_BYTES)
      throw new RouterError('INTERNAL', 'a runner answered with a list larger than 32 MiB')
    chunks.push(chunk as Buffer)
  }
  return Buffer.concat(chunks).toString('utf8')
}

/** Lists the sandboxes of every shard with the client's headers. */
export async function listAcrossShards(options: {
  shards: readonly Shard[]
  pathAndQuery: string
  headers: OutgoingHttpHeaders
  pool: UpstreamPool
  connectTimeoutMs: number
  onUnreachable: (shard: string, problem: string) => void
}): Promise<ListAnswer> {
  const answers = await Promise.all(
    options.shards.map(async (shard) => {
      try {
        const res = await callUpstream({
          shard,
          method: 'GET',
          pathAndQuery: options.pathAndQuery,
          headers: options.headers,
          body: undefined,
          pool: options.pool,
          connectTimeoutMs: options.connectTimeoutMs,
        })
        const text = await readBody(res)
        return { shard, status: res.statusCode ?? 502, text }
      } catch (error) {
        if (error instanceof RouterError && error.code === 'RUNNER_UNAVAILABLE') {
          options.onUnreachable(shard.name, error.message)
          return { shard, status: 0, text: '' }
        }
        throw error
      }
    }),
  )
  const down = answers.filter((a) => a.status === 0).map((a) => a.shard.name)
  // The most telling refusal wins: a credential some runner knows but may not list with (403),
  // then one a runner does not know (401), then any other.
  const refused =
    answers.find((a) => a.status === 403) ??
    answers.find((a) => a.status === 401) ??
    answers.find((a) => a.status !== 0 && a.status >= 300)
  if (refused) return { status: refused.status, body: safeJson(refused.text) }
  if (down.length > 0) {
    throw new RouterError(
      'RUNNER_UNAVAILABLE',
      `cannot list every sandbox: runner shard${down.length > 1 ? 's' : ''} ${down.join(', ')} ${down.length > 1 ? 'are' : 'is'} not answering; get sandboxes by id from the shards that answer meanwhile`,
      { details: { shards: down } },
    )
  }
  const sandboxes = answers.flatMap((a) => {
    const parsed = ShardList.safeParse(safeJson(a.text))
    if (!parsed.success)
      throw new RouterError(
        'INTERNAL',
        `runner shard ${a.shard.name} answered the list with a body that is not a sandbox list`,
      )
    return parsed.data.sandboxes
  })
  sandboxes.sort((a, b) => (a.createdAt ?? 0) - (b.createdAt ?? 0))
  return { status: 200, body: { sandboxes } }
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    return { error: { code: 'INTERNAL', message: 'a runner answered with a body that is not JSON' } }
  }
}
