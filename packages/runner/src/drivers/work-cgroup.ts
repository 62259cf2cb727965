// Where a sandbox's `work` cgroup appears inside it. The sandbox's group holds its agent; the
// agent moves each shell and process into the `work` child before it runs anything (it writes
// the child's pid to the cgroup.procs bound here, writable only by the agent), so a command that
// exhausts memory is OOM-killed inside `work` and never takes the agent. The groups themselves
// are made by cgroups.ts, on cgroup v1 or v2.

/** Memory kept for the agent above the sandbox's own limit. */
export const AGENT_MEMORY_RESERVE_BYTES = 256 * 1024 * 1024

/** Where the work group's files appear inside the sandbox. */
export const GUEST_WORK_CGROUP = {
  /** Writable by the agent only: it writes a child's pid here to move it in. */
  procs: '/run/conch/cgroup.procs',
  /** Read-only: its `oom_kill N` line counts the commands the limit killed (v1 memory.oom_control, v2 memory.events). */
  oomEvents: '/run/conch/oom_events',
}
