// The environment every driver gives the agent, which its shells start from (unless a session
// asks for `cleanEnv`): the sandbox's PATH and home, the user its shells run as under both names
// a login sets (USER and LOGNAME), a UTF-8 locale and a terminal type that asks for no escapes.
// The sandbox spec's `env` goes over it in each driver.

/** The PATH of a sandbox whose host gives none: the system's standard directories. */
export const DEFAULT_SANDBOX_PATH = '/usr/local/bin:/usr/bin:/bin'

/** Who a sandbox's shells run as, and where. */
export interface SandboxBaseEnvInput {
  /** The user's name, as `whoami` prints it inside the sandbox. */
  user: string
  /** The user's home: the sandbox's workspace. */
  home: string
  /** The PATH commands are looked up in. */
  path: string
}

/** The base environment of a sandbox whose shells run as `user` in `home`. */
export function sandboxBaseEnv(input: SandboxBaseEnvInput): Record<string, string> {
  return {
    PATH: input.path,
    HOME: input.home,
    USER: input.user,
    LOGNAME: input.user,
    LANG: 'C.UTF-8',
    TERM: 'dumb',
  }
}
