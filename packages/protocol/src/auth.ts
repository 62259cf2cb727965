// Credential formats. Clients send the API key or a sandbox-scoped token as
// `Authorization: Bearer <secret>`. Browsers cannot set headers on a WebSocket, so the shell
// socket also accepts the secret as a subprotocol `bearer.<secret>` next to `SHELL_SUBPROTOCOL`;
// the runner answers with `SHELL_SUBPROTOCOL` and never echoes the secret.

/** Prefix of runner API keys. */
export const API_KEY_PREFIX = 'conch_'
/** Prefix of sandbox-scoped tokens. */
export const SANDBOX_TOKEN_PREFIX = 'cst_'
/** The subprotocol the shell WebSocket speaks. */
export const SHELL_SUBPROTOCOL = 'conch.v1'
/** Prefix of the subprotocol entry that carries a secret. */
export const BEARER_SUBPROTOCOL_PREFIX = 'bearer.'
