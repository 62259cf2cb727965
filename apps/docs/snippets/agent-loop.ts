import { Sandbox } from '@conch/sdk'

/** The model call; replace it with your LLM client. It returns the next command, or null when done. */
declare function nextCommand(transcript: string): Promise<string | null>

// #region loop
await using sb = await Sandbox.create({
  url: process.env.CONCH_URL ?? 'http://127.0.0.1:7878',
  apiKey: process.env.CONCH_API_KEY,
})
await using sh = await sb.shell({ commandTimeoutMs: 120_000 })

let transcript = 'Task: make the tests in app/ pass.\n'
for (let step = 0; step < 50; step++) {
  const command = await nextCommand(transcript)
  if (command === null) break
  const r = await sh.run(command)
  transcript += `$ ${command}\n${r.stdout}${r.stderr}`
  if (r.truncated)
    transcript += `[output cut: ${r.stdoutBytes} bytes of stdout, ${r.stderrBytes} of stderr]\n`
  if (r.timedOut) transcript += `[stopped after the timeout; the shell is still usable]\n`
  transcript += `[exit ${r.exitCode}, ${r.durationMs.toFixed(1)} ms]\n`
}
// #endregion loop
