import { z } from 'zod'
import { REFINEMENTS } from './refinements.ts'

// The agent's command line as a schema (`agent-launch.ts` builds the command line). The agent
// itself checks its arguments with the JSON Schema generated from this one
// (`agent-inbound-schemas.ts`), so it runs without zod.

const Fd = z.coerce.number().int().min(3)

/** Command-line flags of the agent, as `--name value` pairs. */
export const AgentArgs = z
  .object({
    /** An inherited listening Unix socket to serve on (what drivers use). */
    listenFd: Fd.optional(),
    /** A Unix socket path to bind and serve on instead (tests and benchmarks), mode 0600. */
    socket: z.string().min(1).optional(),
    /** An inherited fd to read the link secret from, to EOF. */
    secretFd: Fd.optional(),
    /** A root-only file to read the link secret from, which the agent deletes once read (drivers that cannot pass fds). */
    secretFile: z.string().startsWith('/').optional(),
    /** The sandbox's workspace root: file paths `/workspace/...` map here, sessions start here. */
    root: z.string().min(1),
    /** Bytes of scrollback kept per session. */
    scrollbackBytes: z.coerce.number().int().positive().optional(),
    /** Most sessions the agent keeps open at once (the runner's per-sandbox limit). */
    maxSessions: z.coerce.number().int().positive().optional(),
    /** Most background processes the agent runs at once. */
    maxProcesses: z.coerce.number().int().positive().optional(),
    /** Uid that shells and processes run as (the agent itself keeps its own); default: the agent's. */
    sandboxUid: z.coerce.number().int().nonnegative().optional(),
    /** Gid that shells and processes run as; default: the agent's. */
    sandboxGid: z.coerce.number().int().nonnegative().optional(),
    /** A cgroup.procs file every shell and process moves itself into before it runs. */
    workCgroup: z.string().startsWith('/').optional(),
    /** A second cgroup.procs file each shell and process is moved into too (cgroup v1: the work group's pids hierarchy). */
    workPidsCgroup: z.string().startsWith('/').optional(),
    /** A read-only file whose `oom_kill N` line counts the work group's OOM kills; marks 137 exits `oomKilled`. */
    oomEvents: z.string().startsWith('/').optional(),
    /**
     * Where the agent keeps command files and its children's pipes; default `/dev/shm` when it
     * is a tmpfs, else the OS temp directory. A driver whose agent shares the host's `/dev/shm`
     * gives one of the sandbox's own, so what a killed agent leaves goes with the sandbox.
     */
    tempRoot: z.string().startsWith('/').optional(),
  })
  .refine(REFINEMENTS.oneListener.test, REFINEMENTS.oneListener.message)
  .refine(REFINEMENTS.oneSecretSource.test, REFINEMENTS.oneSecretSource.message)
/** Agent arguments. */
export type AgentArgs = z.infer<typeof AgentArgs>
