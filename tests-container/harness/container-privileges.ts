// The privileges the runner's namespace driver needs in a container, as `docker run` flags.
// The docs site's Deploy page has the same list with the reason for each, and
// deploy/compose/compose.yaml grants the same set; test/privileges.test.ts shows that each one
// is needed, by dropping it and watching sandbox creation fail.
import { fileURLToPath } from 'node:url'

/** The seccomp profile shipped for the namespace driver. */
export const SECCOMP_PROFILE = fileURLToPath(
  new URL('../../deploy/docker/seccomp-namespace.json', import.meta.url),
)

/** One privilege: its name in the docs' table and its flags. */
export interface Privilege {
  /** Short name, as in the docs' table. */
  readonly name: string
  /** The `docker run` flags that grant it. */
  readonly flags: readonly string[]
}

/** Every privilege the namespace driver needs, narrowest first. */
export const NAMESPACE_DRIVER_PRIVILEGES: readonly Privilege[] = [
  { name: 'CAP_SYS_ADMIN', flags: ['--cap-add', 'SYS_ADMIN'] },
  { name: 'CAP_SYS_PTRACE', flags: ['--cap-add', 'SYS_PTRACE'] },
  { name: 'loop devices', flags: ['--device', '/dev/loop-control', '--device-cgroup-rule', 'b 7:* rwm'] },
  { name: 'seccomp profile', flags: ['--security-opt', `seccomp=${SECCOMP_PROFILE}`] },
  { name: 'unmasked /proc', flags: ['--security-opt', 'systempaths=unconfined'] },
  // Only AppArmor hosts confine containers; docker's default profile there denies mount.
  { name: 'AppArmor unconfined', flags: ['--security-opt', 'apparmor=unconfined'] },
]

/** The flags of every privilege except the one named `without`. */
export function privilegeFlags(without?: string): string[] {
  return NAMESPACE_DRIVER_PRIVILEGES.filter((p) => p.name !== without).flatMap((p) => [...p.flags])
}
