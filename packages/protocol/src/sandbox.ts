import { z } from 'zod'
import { Env, SandboxId, TimeoutMs, Timestamp } from './primitives.ts'

/** How strongly a driver isolates a sandbox from the host. */
export const Isolation = z.enum(['none', 'namespace', 'vm'])
/** An isolation level. */
export type Isolation = z.infer<typeof Isolation>

/** Resource limits of a sandbox; drivers without isolation record them but cannot enforce them. */
export const SandboxLimits = z.object({
  /** Memory limit in bytes. */
  memoryBytes: z.number().int().positive().optional(),
  /** CPU limit in cores (0.5 = half a core). */
  cpus: z.number().positive().max(256).optional(),
  /** Process count limit. */
  pids: z.number().int().positive().optional(),
  /** Workspace size limit in bytes. */
  diskBytes: z.number().int().positive().optional(),
})
/** Sandbox limits. */
export type SandboxLimits = z.infer<typeof SandboxLimits>

/** Body of `POST /v1/sandboxes`. */
export const CreateSandboxRequest = z.object({
  /** Driver name; defaults to the runner's configured driver. */
  driver: z.string().min(1).max(64).optional(),
  /** Base environment of every session in the sandbox. */
  env: Env.optional(),
  /** Resource limits. */
  limits: SandboxLimits.optional(),
  /** Destroy the sandbox after this long without API activity. */
  idleTimeoutMs: TimeoutMs.optional(),
  /** Free-form labels, returned as given. */
  metadata: z.record(z.string(), z.string().max(1024)).optional(),
})
/** Sandbox creation options. */
export type CreateSandboxRequest = z.infer<typeof CreateSandboxRequest>

/** A sandbox. */
export const SandboxInfo = z.object({
  /** Sandbox id. */
  id: SandboxId,
  /** `running` while its agent answers; `dead` when the agent died (see `deadReason`). */
  status: z.enum(['starting', 'running', 'dead', 'destroyed']),
  /** Driver that created it. */
  driver: z.string(),
  /** What isolates it from the host. */
  isolation: Isolation,
  /** One sentence on what the driver does and does not isolate. */
  description: z.string(),
  /** The workspace directory as its shells see it. */
  workdir: z.string(),
  /** Resource limits. */
  limits: SandboxLimits,
  /** Free-form labels. */
  metadata: z.record(z.string(), z.string()),
  /** When it was created. */
  createdAt: Timestamp,
  /** Why the agent is gone, when status is `dead`. */
  deadReason: z.string().nullable(),
})
/** A sandbox. */
export type SandboxInfo = z.infer<typeof SandboxInfo>

/** Body of `POST /v1/sandboxes/:id/tokens`. */
export const CreateTokenRequest = z.object({
  /** Lifetime of the token; defaults to 15 minutes, at most 24 hours. */
  ttlMs: z.number().int().positive().optional(),
})
/** Token creation options. */
export type CreateTokenRequest = z.infer<typeof CreateTokenRequest>

/** A sandbox-scoped access token. */
export const AccessToken = z.object({
  /** The bearer secret; usable only for this sandbox. Shown once. */
  token: z.string(),
  /** The sandbox it grants access to. */
  sandboxId: SandboxId,
  /** When it stops working. */
  expiresAt: Timestamp,
})
/** An access token. */
export type AccessToken = z.infer<typeof AccessToken>
