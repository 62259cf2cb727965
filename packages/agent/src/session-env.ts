/** Variables every shell starts with, so pagers and prompts never wait for a terminal. */
export const NON_INTERACTIVE_ENV: Readonly<Record<string, string>> = {
  PAGER: 'cat',
  GIT_PAGER: 'cat',
  GIT_TERMINAL_PROMPT: '0',
  DEBIAN_FRONTEND: 'noninteractive',
}

/**
 * The starting environment of a shell or process: the sandbox's base environment (or nothing
 * with `cleanEnv`), then the non-interactive defaults, then the caller's variables. The host's
 * own environment never enters: `base` is what the driver gave the agent.
 */
export function buildSessionEnv(
  base: Readonly<Record<string, string>>,
  cleanEnv: boolean,
  extra: Readonly<Record<string, string>> = {},
): Record<string, string> {
  return { ...(cleanEnv ? {} : base), ...NON_INTERACTIVE_ENV, ...extra }
}
