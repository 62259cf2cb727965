// The second hop of the bare reference: a Node process that holds one bash over pipes and
// serves it on a Unix socket, bytes in and bytes out, nothing else (no framing, no auth, no
// state). It prints `ready` once it listens; the socket path is its one argument.
import { spawn } from 'node:child_process'
import { createServer } from 'node:net'

const path = process.argv[2]
if (!path) throw new Error('usage: bare-bash-holder.ts <socket path>')

const bash = spawn('bash', ['--noprofile', '--norc'], {
  stdio: ['pipe', 'pipe', 'ignore'],
  env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/tmp' },
})
bash.once('exit', () => process.exit(0))

const server = createServer((socket) => {
  socket.pipe(bash.stdin, { end: false })
  bash.stdout.pipe(socket)
  socket.once('close', () => bash.stdout.unpipe(socket))
})
server.listen(path, () => process.stdout.write('ready\n'))
process.stdin.resume()
process.stdin.once('end', () => {
  bash.kill('SIGKILL')
  process.exit(0)
})
