// Picks the `Cgroups` implementation for what `detectCgroups` found on this host.
import { assertNever } from '@conch/protocol'
import { RunnerError } from '../runner-error.ts'
import { CgroupsV1 } from './cgroup-v1.ts'
import { CgroupsV2 } from './cgroup-v2.ts'
import { type CgroupDetectOptions, type CgroupHost, type Cgroups, detectCgroups } from './cgroups.ts'

/** The implementation for a detected host; AGENT_UNAVAILABLE with the detection's problem when there is none. */
export function cgroupsFor(host: CgroupHost): Cgroups {
  switch (host.version) {
    case 1:
      return new CgroupsV1({ controllers: host.controllers })
    case 2:
      return new CgroupsV2(host)
    case null:
      throw new RunnerError('AGENT_UNAVAILABLE', `cannot limit sandboxes on this host: ${host.problem}`)
    default:
      return assertNever(host)
  }
}

/** Detects this host's cgroups and returns the implementation for them. */
export function hostCgroups(options: CgroupDetectOptions = {}): Cgroups {
  return cgroupsFor(detectCgroups(options))
}
