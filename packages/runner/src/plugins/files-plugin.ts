// Files. Reads stream raw bytes from an agent channel into the response (credit is granted as
// the HTTP client pulls), or answer JSON `{content, encoding}` with `?encoding=`. Writes stream
// the raw request body into a `file.write` channel, respecting the agent link's backpressure.
// Path checks (traversal, symlinks out of the workspace) are the agent's: it answers
// PATH_OUTSIDE_SANDBOX.
import { Readable } from 'node:stream'
import { LIMITS } from '@conch/protocol'
import type { FastifyInstance } from 'fastify'
import { bindRoutes } from '../route-table.ts'
import type { ChannelEvent, RunnerChannel } from '../runner-channel.ts'
import type { RunnerContext } from '../runner-context.ts'
import { RunnerError } from '../runner-error.ts'

/** Largest file a JSON read returns; larger files are read as raw bytes. */
const MAX_JSON_READ_BYTES = LIMITS.maxAgentFrameBytes

function rawBody(channel: RunnerChannel): Readable {
  let owed = 0
  const out = new Readable({
    read() {
      if (owed > 0) {
        channel.release(owed)
        owed = 0
      }
    },
    destroy(error, callback) {
      channel.close()
      callback(error)
    },
  })
  channel.consume((event: ChannelEvent) => {
    if (event.type === 'data') {
      if (out.push(event.payload)) channel.release(event.payload.byteLength)
      else owed += event.payload.byteLength
    } else if (event.type === 'end' || event.type === 'shell_closed') out.push(null)
    else if (event.type === 'error') out.destroy(RunnerError.fromWire(event.error))
  })
  return out
}

function collect(channel: RunnerChannel): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const parts: Uint8Array[] = []
    let size = 0
    channel.consume((event) => {
      if (event.type === 'data') {
        size += event.payload.byteLength
        if (size > MAX_JSON_READ_BYTES) {
          channel.close()
          reject(
            new RunnerError(
              'FRAME_TOO_LARGE',
              `the file exceeds ${MAX_JSON_READ_BYTES} bytes; read it without ?encoding= to get raw bytes`,
            ),
          )
          return
        }
        parts.push(event.payload)
        channel.release(event.payload.byteLength)
      } else if (event.type === 'end' || event.type === 'shell_closed') resolve(Buffer.concat(parts))
      else if (event.type === 'error') reject(RunnerError.fromWire(event.error))
    })
  })
}

async function* chunksOf(
  body: AsyncIterable<Buffer | string> | Iterable<Buffer | string>,
): AsyncGenerator<Uint8Array> {
  for await (const chunk of body) {
    const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : chunk
    for (let i = 0; i < bytes.byteLength; i += LIMITS.maxDataChunkBytes) {
      yield bytes.subarray(i, i + LIMITS.maxDataChunkBytes)
    }
  }
}

/** Files: read, write, list, stat, mkdir, remove, rename. */
export async function filesPlugin(app: FastifyInstance, ctx: RunnerContext): Promise<void> {
  const link = (id: string) => ctx.manager.get(id).link()
  bindRoutes(app, {
    readFile: async ({ params, query, reply }) => {
      const agent = await link(params.id)
      const channel = agent.openChannel()
      let info: Awaited<ReturnType<typeof agent.call<'file.read'>>>
      try {
        info = await agent.call('file.read', { path: query.path, ch: channel.id })
      } catch (error) {
        channel.close()
        throw error
      }
      if (query.encoding) {
        const bytes = await collect(channel)
        return { path: info.path, content: bytes.toString(query.encoding), encoding: query.encoding }
      }
      reply.type('application/octet-stream')
      return reply.send(rawBody(channel))
    },
    listFiles: async ({ params, query }) => (await link(params.id)).call('file.list', { path: query.path }),
    statFile: async ({ params, query }) => (await link(params.id)).call('file.stat', { path: query.path }),
    mkdir: async ({ params, body }) => (await link(params.id)).call('file.mkdir', body),
    removeFile: async ({ params, body }) => {
      await (await link(params.id)).call('file.remove', body)
      return { ok: true as const }
    },
    renameFile: async ({ params, body }) => (await link(params.id)).call('file.rename', body),
  })

  // The write route gets every body as a raw stream, whatever its content type (a JSON or text
  // file is still just bytes): its own scope drops the JSON and text parsers.
  await app.register(async (raw) => {
    raw.removeAllContentTypeParsers()
    raw.addContentTypeParser('*', (_request, payload, done) => done(null, payload))
    bindRoutes(raw, {
      writeFile: async ({ params, query, request }) => {
        const agent = await link(params.id)
        const channel = agent.openChannel()
        const result = agent.call('file.write', { path: query.path, ch: channel.id })
        let failed = false
        result.catch(() => {
          failed = true
        })
        try {
          const body = request.body
          if (body && typeof body === 'object' && Symbol.asyncIterator in body) {
            for await (const chunk of chunksOf(body as AsyncIterable<Buffer>)) {
              if (failed || !(await channel.write({ type: 'data' }, chunk))) break
            }
          } else if (typeof body === 'string' || Buffer.isBuffer(body)) {
            for await (const chunk of chunksOf([body])) {
              if (!(await channel.write({ type: 'data' }, chunk))) break
            }
          }
          if (!failed) channel.send({ type: 'end' })
          return await result
        } finally {
          channel.close()
        }
      },
    })
  })
}
