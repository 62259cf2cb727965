import { LIMITS } from '@conch/protocol'
import type { FastifyInstance } from 'fastify'
import { generateToken, hashSecret } from '../credentials.ts'
import { bindRoutes } from '../route-table.ts'
import type { RunnerContext } from '../runner-context.ts'
import { RunnerError } from '../runner-error.ts'

/** Sandboxes: create, list, get, destroy, and sandbox-scoped tokens. */
export async function sandboxesPlugin(app: FastifyInstance, ctx: RunnerContext): Promise<void> {
  bindRoutes(app, {
    createSandbox: async ({ body }) => {
      const egress = ctx.egress.prepare(body.network)
      if (!egress) return ctx.manager.create(body)
      const info = await ctx.manager.create({ ...body, env: { ...body.env, ...egress.env } })
      try {
        if (info.isolation === 'none')
          throw new RunnerError(
            'LIMITS_NOT_ENFORCEABLE',
            `the ${info.driver} driver has no network namespace, so an egress allowlist cannot be enforced; use the namespace or gvisor driver`,
          )
        await ctx.egress.start(info.id, egress)
      } catch (error) {
        await ctx.manager.destroy(info.id).catch(() => {})
        throw error
      }
      return info
    },
    listSandboxes: async () => ({
      sandboxes: await Promise.all(ctx.manager.list().map((s) => ctx.manager.info(s))),
    }),
    getSandbox: async ({ params }) => ctx.manager.info(ctx.manager.get(params.id)),
    keepSandboxAlive: async ({ params, body }) => {
      const sandbox = ctx.manager.get(params.id)
      ctx.manager.lifetimes.keepAlive(sandbox, body.durationMs)
      return ctx.manager.info(sandbox)
    },
    destroySandbox: async ({ params }) => {
      await ctx.manager.destroy(params.id)
      return { ok: true as const }
    },
    createToken: async ({ params, body }) => {
      const sandbox = ctx.manager.get(params.id)
      const ttlMs = body.ttlMs ?? LIMITS.defaultTokenTtlMs
      if (ttlMs > LIMITS.maxTokenTtlMs) {
        throw new RunnerError(
          'BAD_REQUEST',
          `ttlMs ${ttlMs} exceeds the maximum of ${LIMITS.maxTokenTtlMs} ms (24 h)`,
        )
      }
      const token = generateToken()
      const expiresAt = ctx.now() + ttlMs
      ctx.store.addToken({ hash: hashSecret(token), sandboxId: sandbox.id, expiresAt }, ctx.now())
      return { token, sandboxId: sandbox.id, expiresAt }
    },
  })
}
