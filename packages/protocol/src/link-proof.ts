// The agent link's mutual proof of a shared secret. The runner mints a random secret per
// sandbox, keeps it in its state, and hands it to the agent on a pipe at start; nothing in the
// sandbox can read it. Each side sends a fresh challenge and answers the other's with an HMAC
// of it, labelled by role so one side's answer is never valid as the other's. A runner that
// reaches the wrong agent, or an agent reached by something that is not its runner, fails the
// check. Node-only (node:crypto): exported as `@conch/protocol/link-proof`, outside the index
// the SDK bundles.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto'

/** Which end of the link computes a proof. */
export type LinkRole = 'agent' | 'runner'

/** Bytes of a link secret. */
const SECRET_BYTES = 32

/** A fresh link secret, as 64 hex digits. */
export function mintLinkSecret(): string {
  return randomBytes(SECRET_BYTES).toString('hex')
}

/** A fresh challenge, as 64 hex digits. */
export function linkNonce(): string {
  return randomBytes(32).toString('hex')
}

/** The proof that `role` holds `secret`, answering `challenge`. */
export function linkProof(secret: string, role: LinkRole, challenge: string): string {
  return createHmac('sha256', secret).update(`conch-link/${role}/${challenge}`).digest('hex')
}

/** True when `proof` is `role`'s answer to `challenge` under `secret`; constant time. */
export function checkLinkProof(secret: string, role: LinkRole, challenge: string, proof: string): boolean {
  const want = Buffer.from(linkProof(secret, role, challenge), 'hex')
  const got = Buffer.from(proof, 'hex')
  return got.length === want.length && timingSafeEqual(got, want)
}
