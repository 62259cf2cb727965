import { Sandbox } from '@conch/sdk'

await using sb = await Sandbox.create({
  url: process.env.CONCH_URL ?? 'http://127.0.0.1:7878',
  apiKey: process.env.CONCH_API_KEY,
})

// #region open
// An interactive bash on a pseudo-terminal: raw bytes in, the screen's bytes out.
const term = await sb.terminal({ cols: 100, rows: 30 })
let screen = ''
term.onData((bytes) => {
  screen += new TextDecoder().decode(bytes)
})
term.write('cd /tmp; pwd\r') // '\r' is Enter, '\x03' Ctrl-C, '\x04' Ctrl-D
await term.resize(120, 40) // the program gets SIGWINCH; `stty size` says 40 120
// #endregion open

// #region reattach
// Elsewhere (another process, a browser with a sandbox token): the same terminal, replayed.
const again = await sb.attachTerminal(term.id, { offset: 0 })
again.write('exit\r')
console.log(await again.exited) // { code: 0, signal: null }
// #endregion reattach

// #region stdin
// A run that asks a question: its stdin is a pipe you answer while it runs.
await using sh = await sb.shell()
const run = sh.run("read -p 'name? ' n; echo hi $n", { stdin: 'pipe' })
run.write('bob\n')
console.log((await run).stdout) // "hi bob\n"
// #endregion stdin

if (!screen.includes('/tmp')) throw new Error(`the terminal did not show /tmp: ${JSON.stringify(screen)}`)
