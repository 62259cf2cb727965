import type { FastifyInstance } from 'fastify'
import { bindRoutes } from '../route-table.ts'
import type { RunnerContext } from '../runner-context.ts'
import { RunnerError } from '../runner-error.ts'
import { snapshotInfo } from '../snapshots/snapshot-store.ts'

/**
 * Snapshots: take one of a sandbox (the key or that sandbox's token), list a sandbox's, and
 * list, get and delete any (the key only). Forks are `createSandbox` with `fromSnapshot`.
 */
export async function snapshotsPlugin(app: FastifyInstance, ctx: RunnerContext): Promise<void> {
  const store = () => {
    if (ctx.snapshots === undefined) {
      throw new RunnerError(
        'BAD_REQUEST',
        'this runner keeps no snapshots (it was built without a snapshot store); start it with `conch runner`, which keeps them in its state dir.',
      )
    }
    return ctx.snapshots.store
  }
  bindRoutes(app, {
    hibernateSandbox: async ({ params }) => ctx.manager.hibernate(ctx.manager.get(params.id)),
    takeSnapshot: async ({ params, body }) =>
      ctx.manager.snapshot(ctx.manager.get(params.id), body.name ?? null),
    listSandboxSnapshots: async ({ params }) => {
      const sandbox = ctx.manager.get(params.id)
      return {
        snapshots: store()
          .list()
          .filter((m) => m.sandboxId === sandbox.id)
          .map(snapshotInfo),
      }
    },
    listSnapshots: async () => ({ snapshots: store().list().map(snapshotInfo) }),
    getSnapshot: async ({ params }) => snapshotInfo(store().get(params.snapshotId)),
    deleteSnapshot: async ({ params }) => {
      await store().delete(params.snapshotId)
      return { ok: true as const }
    },
  })
}
