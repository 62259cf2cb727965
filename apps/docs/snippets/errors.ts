import { ConchError, OutputLostError, Sandbox, SandboxNotFoundError, ShellClosedError } from '@conch/sdk'

const opts = {
  url: process.env.CONCH_URL ?? 'http://127.0.0.1:7878',
  apiKey: process.env.CONCH_API_KEY,
}

// #region catch
try {
  const sb = await Sandbox.connect('sb_0123456789ab', opts)
  await using sh = await sb.shell()
  await sh.run('exit 3')
} catch (error) {
  if (error instanceof ShellClosedError) console.log('bash ended:', error.message)
  else if (error instanceof SandboxNotFoundError) console.log('no such sandbox')
  else if (error instanceof OutputLostError)
    console.log('output evicted; the oldest kept is', error.earliestOffset)
  else if (error instanceof ConchError)
    console.log(error.code, error.details, 'what to do:', error.suggestion)
  else throw error
}
// #endregion catch
