// What the namespace driver keeps in a sandbox's handle (the state store holds it, so a restarted
// runner finds the sandbox's folder, socket, cgroups and first process again), and the
// workspace's path as the sandbox's shells see it.
import { z } from 'zod'
import { SandboxCgroup } from './cgroups.ts'

/** The workspace as the sandbox's shells see it. */
export const GUEST_WORKSPACE = '/workspace'

/** The namespace driver's handle state. */
export const NamespaceState = z.object({
  /** Folder holding the workspace, generated /etc files and the agent log. */
  dir: z.string(),
  /** The workspace on the host. */
  workspace: z.string(),
  /** The generated /etc files on the host. */
  etcDir: z.string(),
  /** Whether the workspace is on the sandbox's own loop-mounted disk (see workspace-disk.ts). */
  disk: z.boolean(),
  /** The folder (0700, the runner's, never mounted in the sandbox) holding the agent's socket. */
  socketDir: z.string(),
  /** The sandbox's link secret. */
  linkSecret: z.string(),
  /** The sandbox's cgroups (v1 or v2), with the `work` group its commands run in; null rootless without a delegated v2 subtree. */
  cgroup: SandboxCgroup.nullable(),
  /** Whether a runner that is not root made it (see rootless-host.ts). */
  rootless: z.boolean().default(false),
  /** Pid of the sandbox's first process (bwrap), once started. */
  pid: z.number().int().positive().optional(),
  /** Its start time from /proc/<pid>/stat, so a recycled pid is not mistaken for it. */
  startTime: z.string().optional(),
})
/** The namespace driver's handle state. */
export type NamespaceState = z.infer<typeof NamespaceState>
