// A server for a sandbox to run, reached through the router's port relay. It listens on
// 127.0.0.1 (port 0), writes its port to `<name>.port`, answers every request with what it
// received as JSON (the body as its byte count and SHA-256), and echoes WebSocket messages (unfragmented frames under 64 KiB), text and
// binary as sent. Plain Node, so it runs in any sandbox with no packages installed.
export const SANDBOX_SERVER = `
const http = require('node:http')
const fs = require('node:fs')
const crypto = require('node:crypto')
const name = process.argv[2]
const server = http.createServer((req, res) => {
  let body = 0
  const hash = crypto.createHash('sha256')
  req.on('data', (c) => { body += c.length; hash.update(c) })
  req.on('end', () => {
    res.setHeader('content-type', 'application/json')
    res.end(JSON.stringify({ method: req.method, url: req.url, host: req.headers.host, body, sha256: hash.digest('hex') }))
  })
})
server.on('upgrade', (req, socket, head) => {
  const accept = crypto.createHash('sha1').update(req.headers['sec-websocket-key'] + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest('base64')
  socket.write('HTTP/1.1 101 Switching Protocols\\r\\nupgrade: websocket\\r\\nconnection: Upgrade\\r\\nsec-websocket-accept: ' + accept + '\\r\\n\\r\\n')
  let buffer = Buffer.alloc(0)
  const onData = (chunk) => {
    buffer = Buffer.concat([buffer, chunk])
    for (;;) {
      if (buffer.length < 2) return
      const opcode = buffer[0] & 0x0f
      let length = buffer[1] & 0x7f
      let at = 2
      if (length === 126) { if (buffer.length < 4) return; length = buffer.readUInt16BE(2); at = 4 }
      if (buffer.length < at + 4 + length) return
      const mask = buffer.subarray(at, at + 4)
      const payload = Buffer.from(buffer.subarray(at + 4, at + 4 + length))
      for (let i = 0; i < payload.length; i++) payload[i] ^= mask[i % 4]
      buffer = buffer.subarray(at + 4 + length)
      if (opcode === 8) return socket.end(Buffer.from([0x88, 0]))
      const header = payload.length < 126 ? Buffer.from([0x80 | opcode, payload.length]) : Buffer.from([0x80 | opcode, 126, payload.length >> 8, payload.length & 0xff])
      socket.write(Buffer.concat([header, payload]))
    }
  }
  socket.on('data', onData)
  socket.on('error', () => {})
  if (head.length) onData(head)
})
server.listen(0, '127.0.0.1', () => {
  fs.writeFileSync(name + '.port.tmp', String(server.address().port))
  fs.renameSync(name + '.port.tmp', name + '.port')
})
`
