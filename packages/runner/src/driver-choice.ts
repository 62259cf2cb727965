// Which sandbox drivers a runner offers, and which one a request gets when it names none. The
// operator allows a set (`--drivers`, by default every isolating driver this host can run but
// the opt-in gVisor) and a default (`--driver`, where `auto` is the strongest allowed driver).
// A runner that is not root gets the namespace driver rootless when bubblewrap can make an
// unprivileged user namespace (the driver's `problem` says why not). A driver that does not
// isolate is refused while the runner is root unless the operator says `--unsafe-local`, and a
// host where nothing isolates refuses to start instead of falling back to no isolation.
import { ConfigError } from './config-error.ts'
import type { SandboxDriver } from './drivers/sandbox-driver.ts'

/** Every driver name, strongest isolation first; `auto` takes the first one allowed. */
export const DRIVERS_BY_STRENGTH = ['gvisor', 'namespace', 'local', 'ssh'] as const

/**
 * Drivers in the default set only when the operator names them (`--driver` or `--drivers`):
 * gVisor's ptrace platform costs every syscall a round trip, so it is a choice, not a default;
 * ssh runs sandboxes on other machines, which only the operator can decide.
 */
const OPT_IN: readonly string[] = ['gvisor', 'ssh']
/** A driver name. */
export type DriverName = (typeof DRIVERS_BY_STRENGTH)[number]

/** A driver this runner could offer, and why it cannot run on this host (null when it can). */
export interface DriverCandidate {
  /** The driver. */
  driver: SandboxDriver
  /** Why this host cannot run it, or null. */
  problem: string | null
}

/** What the choice depends on: the operator's settings and the host's facts. */
export interface DriverChoiceInput {
  /** `--driver`: the default, or `auto`. */
  driver: 'auto' | DriverName
  /** `--drivers`: the allowed set; undefined for the default set. */
  drivers: readonly DriverName[] | undefined
  /** `--unsafe-local`: the local driver may run while the runner is root. */
  unsafeLocal: boolean
  /** Whether the runner runs as root. */
  root: boolean
  /** Every driver by name. */
  candidates: Readonly<Record<DriverName, DriverCandidate>>
}

/** The drivers a runner offers and its default. */
export interface DriverChoice {
  /** Allowed drivers, strongest first. */
  allowed: SandboxDriver[]
  /** The driver a create request gets when it names none. */
  defaultDriver: SandboxDriver
  /** Lines for the startup log at warn level. */
  warnings: string[]
}

/** How to get an isolating driver, for a root runner and for one that is not root. */
const HOW_TO_ISOLATE = {
  root: 'install bubblewrap (apt-get install bubblewrap) and run the runner as root or with cgroup delegation',
  user: 'install bubblewrap (apt-get install bubblewrap) and allow unprivileged user namespaces, or run the runner as root',
}

/** Chooses the allowed drivers and the default; throws ConfigError with one line when it cannot. */
export function chooseDrivers(input: DriverChoiceInput): DriverChoice {
  const howTo = input.root ? HOW_TO_ISOLATE.root : HOW_TO_ISOLATE.user
  const isolating = DRIVERS_BY_STRENGTH.filter((name) => input.candidates[name].driver.isolation !== 'none')
  const explicit = input.driver === 'auto' ? [] : [input.driver]
  const names =
    input.drivers === undefined
      ? DRIVERS_BY_STRENGTH.filter(
          (name) =>
            explicit.includes(name) ||
            (isolating.includes(name) && !OPT_IN.includes(name) && input.candidates[name].problem === null),
        )
      : DRIVERS_BY_STRENGTH.filter((name) => input.drivers?.includes(name))
  if (names.length === 0) {
    const why = isolating
      .filter((name) => !OPT_IN.includes(name))
      .map((name) => `${name}: ${input.candidates[name].problem}`)
      .join('; ')
    const dev = input.root ? '--drivers local --unsafe-local' : '--drivers local'
    throw new ConfigError(
      `no isolating sandbox driver works on this host (${why}); ${howTo}, or for development only pass ${dev} (no isolation)`,
    )
  }
  for (const name of names) {
    const { problem } = input.candidates[name]
    if (problem !== null) {
      const flag = input.drivers === undefined ? `--driver ${name}` : `--drivers ${names.join(',')}`
      throw new ConfigError(`${flag}: the ${name} driver cannot run on this host: ${problem}; ${howTo}`)
    }
    const { driver } = input.candidates[name]
    if (driver.isolation === 'none' && driver.remote !== true && input.root && !input.unsafeLocal) {
      throw new ConfigError(
        `the ${name} driver runs sandbox code with no isolation, here as root (it could read every secret on the host); it is refused unless you pass --unsafe-local (CONCH_UNSAFE_LOCAL=1) for development`,
      )
    }
  }
  const defaultName = input.driver === 'auto' ? names[0]! : input.driver
  if (!names.includes(defaultName)) {
    throw new ConfigError(
      `--driver ${defaultName} is not among the allowed drivers (--drivers ${names.join(',')}); add it or pick one of them`,
    )
  }
  const warnings: string[] = []
  if (input.unsafeLocal) {
    warnings.push(
      input.root
        ? '--unsafe-local: the local driver may run sandbox code as root with no isolation; for development only'
        : '--unsafe-local is set: the local driver runs sandbox code with no isolation; for development only',
    )
  }
  return {
    allowed: names.map((name) => input.candidates[name].driver),
    defaultDriver: input.candidates[defaultName].driver,
    warnings,
  }
}
