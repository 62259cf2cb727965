// Snapshots and what is built on them: a snapshot of a running sandbox, hibernation (snapshot,
// then stop, until the next request wakes it) and keep-alive (holding idle hibernation off).
import type { SandboxInfo, SnapshotInfo } from './resource-info.ts'
import { okBody, sandboxInfo, snapshotInfo, snapshotList } from './rest-shapes.ts'
import type { RunnerConnection } from './runner-connection.ts'
import type { SandboxContext } from './sandbox-context.ts'
import { closeShells } from './sandbox-sessions.ts'

/** Snapshots the sandbox (workspace, shells' state, settings). */
export function takeSnapshot(ctx: SandboxContext, options: { name?: string }): Promise<SnapshotInfo> {
  return ctx.http.json('POST', `${ctx.path}/snapshots`, snapshotInfo, {
    json: options,
    timeoutMs: Math.max(ctx.http.requestTimeoutMs, 120_000),
  })
}

/** Closes the handle's shells, then hibernates the sandbox; returns its new state. */
export function hibernate(ctx: SandboxContext): Promise<SandboxInfo> {
  closeShells(ctx)
  return ctx.http.json('POST', `${ctx.path}/hibernate`, sandboxInfo, {
    timeoutMs: Math.max(ctx.http.requestTimeoutMs, 120_000),
  })
}

/** Holds the sandbox awake for `durationMs` from now (`0` ends the hold); returns its new state. */
export function keepAlive(ctx: SandboxContext, durationMs: number): Promise<SandboxInfo> {
  return ctx.http.json('POST', `${ctx.path}/keep-alive`, sandboxInfo, { json: { durationMs } })
}

/** The snapshots taken of the sandbox, oldest first. */
export async function listSandboxSnapshots(ctx: SandboxContext): Promise<SnapshotInfo[]> {
  return (await ctx.http.json('GET', `${ctx.path}/snapshots`, snapshotList)).snapshots
}

/** Every snapshot on the runner, oldest first. */
export async function listRunnerSnapshots(runner: RunnerConnection): Promise<SnapshotInfo[]> {
  return (await runner.http.json('GET', '/v1/snapshots', snapshotList)).snapshots
}

/** Deletes a snapshot and the stored data only it used. */
export async function deleteSnapshot(runner: RunnerConnection, snapshotId: string): Promise<void> {
  await runner.http.json('DELETE', `/v1/snapshots/${encodeURIComponent(snapshotId)}`, okBody)
}
