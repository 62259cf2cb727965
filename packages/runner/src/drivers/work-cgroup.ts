// Where a sandbox's `work` cgroup appears inside it, and what the agent keeps above it. The
// sandbox's group holds its agent; the agent moves each shell and process into the `work` child
// before it runs anything (it writes the child's pid to the cgroup.procs bound here, writable
// only by the agent). `work` has the sandbox's own memory and pids limits, and the sandbox group
// allows the agent's reserves on top: a command that exhausts memory is OOM-killed inside `work`,
// and a fork bomb that holds every pid `work` allows still leaves the agent the pids it needs to
// start a new shell (a process moved into a full group is allowed; only its forks fail). The
// groups themselves are made by cgroup-v1.ts and cgroup-v2.ts.

/** Memory kept for the agent above the sandbox's own limit. */
export const AGENT_MEMORY_RESERVE_BYTES = 256 * 1024 * 1024

/**
 * Processes and threads kept for the agent above the sandbox's pids limit: its own threads (Node
 * runs about a dozen) plus the forks that start new shells and processes while `work` is full.
 */
export const AGENT_PIDS_RESERVE = 64

/** Where the work group's files appear inside the sandbox. */
export const GUEST_WORK_CGROUP = {
  /** Writable by the agent only: it writes a child's pid here to move it in. */
  procs: '/run/conch/cgroup.procs',
  /** cgroup v1 only: the work group's cgroup.procs in the pids hierarchy, which the agent writes too. */
  pidsProcs: '/run/conch/pids.procs',
  /** Read-only: its `oom_kill N` line counts the commands the limit killed (v1 memory.oom_control, v2 memory.events). */
  oomEvents: '/run/conch/oom_events',
}
