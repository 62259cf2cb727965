import { createServer } from 'node:http'
import { Sandbox } from '@conch/sdk'

const sb = await Sandbox.create({
  url: process.env.CONCH_URL ?? 'http://127.0.0.1:7878',
  apiKey: process.env.CONCH_API_KEY,
})
const sh = await sb.shell()

// #region sse
// GET /run?cmd=... streams the command's output to the browser as Server-Sent Events.
createServer(async (req, res) => {
  const command = new URL(req.url ?? '/', 'http://localhost').searchParams.get('cmd') ?? 'true'
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store' })
  for await (const ev of sh.stream(command)) {
    res.write(`event: ${ev.type}\ndata: ${JSON.stringify(ev)}\n\n`)
  }
  res.end()
}).listen(3000)
// #endregion sse

// #region callbacks
// The same with callbacks, when you also want the buffered result at the end.
const result = await sh.run('npm test', {
  onStdout: (chunk) => process.stdout.write(chunk),
  onStderr: (chunk) => process.stderr.write(chunk),
})
console.log(`exit ${result.exitCode} after ${result.durationMs} ms`)
// #endregion callbacks
