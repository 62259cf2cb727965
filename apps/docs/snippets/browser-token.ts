import { Sandbox } from '@conch/sdk'

// #region server
// On your server, which holds the API key: mint a token for one sandbox, valid for 10 minutes.
const sb = await Sandbox.create({
  url: process.env.CONCH_URL ?? 'http://127.0.0.1:7878',
  apiKey: process.env.CONCH_API_KEY,
})
const { token, expiresAt } = await sb.createAccessToken({ ttlMs: 10 * 60_000 })
// Send { sandboxId: sb.id, token, expiresAt } to the browser, never the API key.
// #endregion server

console.log(sb.id, token, expiresAt)
