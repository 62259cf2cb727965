import type { AccessToken } from './resource-info.ts'
import { accessToken } from './rest-shapes.ts'
import type { SandboxContext } from './sandbox-context.ts'

/** Mints a token for this sandbox only, valid for `options.ttlMs` (the runner's default when absent). */
export function createAccessToken(ctx: SandboxContext, options: { ttlMs?: number }): Promise<AccessToken> {
  return ctx.http.json('POST', `${ctx.path}/tokens`, accessToken, { json: options })
}
