import { type Shell, ShellClosedError } from '@conch/sdk'

// #region closed
/** Runs one command; when the model ran `exit`, opens a fresh shell and says so. */
async function step(sh: Shell, command: string, reopen: () => Promise<Shell>): Promise<[Shell, string]> {
  try {
    const r = await sh.run(command)
    return [sh, `${r.stdout}${r.stderr}[exit ${r.exitCode}]\n`]
  } catch (error) {
    if (!(error instanceof ShellClosedError)) throw error
    return [await reopen(), `[the shell closed (${error.message}); a new one was opened in the workspace]\n`]
  }
}

// #endregion closed

export { step }
