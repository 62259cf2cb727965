import { z } from 'zod'

/**
 * What a sandbox is using now, as its driver measures it (cgroup counters under the namespace
 * driver). Counters (`cpuSeconds`, `oomKills`) only grow over the sandbox's life.
 */
export const SandboxUsage = z.object({
  /** Memory charged to the sandbox now (page cache included), in bytes. */
  memoryBytes: z.number().int().nonnegative(),
  /** The most memory it has been charged at once, in bytes; null where the kernel does not track it. */
  memoryPeakBytes: z.number().int().nonnegative().nullable(),
  /** CPU time its processes have used, user and system, in seconds. */
  cpuSeconds: z.number().nonnegative(),
  /** Processes and threads in it now. */
  pids: z.number().int().nonnegative(),
  /** Processes the kernel killed because the sandbox hit its memory limit. */
  oomKills: z.number().int().nonnegative(),
})
/** A sandbox's resource usage. */
export type SandboxUsage = z.infer<typeof SandboxUsage>
