// The web console's page: xterm.js (served by the runner from its own dependencies, never a CDN)
// attached to one terminal of one sandbox.
//
// The page carries no secret. What it needs comes in the URL fragment, which browsers never send
// to a server: `#sandbox=<id>&token=<sandbox token>[&terminal=<id>]`. Without a terminal id it
// opens one (REST, `Authorization: Bearer <token>`) and writes the id into the fragment, so a
// reload finds the same terminal. The socket authenticates with the token as a
// `bearer.<token>` subprotocol (a browser WebSocket cannot set headers). Output arrives as binary
// messages with their offset; the page resizes the terminal with its window (FitAddon) and, when
// the socket drops, reconnects from the offset after the last byte it drew.

/** The page's HTML: static, with the script inline. */
export const CONSOLE_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>conch console</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="./xterm.css">
<style>
  html, body { margin: 0; height: 100%; background: #111; }
  #term { position: absolute; inset: 0; padding: 4px; }
  #status { position: fixed; right: 8px; top: 4px; z-index: 10; font: 12px sans-serif; color: #aaa; }
</style>
</head>
<body>
<div id="status" role="status">connecting</div>
<div id="term"></div>
<script src="./xterm.js"></script>
<script src="./addon-fit.js"></script>
<script>
(() => {
  const status = document.getElementById('status')
  const params = new URLSearchParams(location.hash.slice(1))
  const sandbox = params.get('sandbox')
  const token = params.get('token')
  if (!sandbox || !token) {
    status.textContent = 'open this page as /console/#sandbox=<id>&token=<sandbox token>'
    return
  }
  const api = location.origin + '/v1/sandboxes/' + encodeURIComponent(sandbox)
  const term = new Terminal({ cursorBlink: true, convertEol: false, scrollback: 5000 })
  const fit = new FitAddon.FitAddon()
  term.loadAddon(fit)
  term.open(document.getElementById('term'))
  fit.fit()
  window.conchConsole = { term, state: () => ({ terminal: params.get('terminal'), offset, status: status.textContent }) }
  let offset = 0
  let socket = null
  let retries = 0
  const headers = { authorization: 'Bearer ' + token, 'content-type': 'application/json' }

  async function terminalId() {
    const known = params.get('terminal')
    if (known) return known
    const res = await fetch(api + '/terminals', {
      method: 'POST', headers, body: JSON.stringify({ cols: term.cols, rows: term.rows }),
    })
    const body = await res.json()
    if (!res.ok) throw new Error(body.error ? body.error.code + ': ' + body.error.message : 'HTTP ' + res.status)
    params.set('terminal', body.id)
    history.replaceState(null, '', '#' + params.toString())
    return body.id
  }

  function sendResize() {
    if (socket && socket.readyState === 1) socket.send(JSON.stringify({ type: 'resize', cols: term.cols, rows: term.rows }))
  }

  async function connect() {
    let id
    try { id = await terminalId() } catch (e) { status.textContent = String(e.message || e); return }
    const url = api.replace(/^http/, 'ws') + '/terminals/' + encodeURIComponent(id) + '/socket?offset=' + offset
    const ws = new WebSocket(url, ['conch.terminal.v1', 'bearer.' + token])
    ws.binaryType = 'arraybuffer'
    socket = ws
    ws.onmessage = (event) => {
      if (typeof event.data === 'string') {
        const frame = JSON.parse(event.data)
        if (frame.type === 'terminal_ready') {
          retries = 0
          status.textContent = 'attached'
          sendResize()
        } else if (frame.type === 'terminal_exit') {
          status.textContent = 'exited ' + frame.code
        } else if (frame.type === 'error') {
          status.textContent = frame.code + ': ' + frame.message
          if (frame.code === 'OUTPUT_LOST' && frame.details) offset = frame.details.earliestOffset
        }
        return
      }
      const view = new DataView(event.data)
      const at = view.getUint32(0) * 4294967296 + view.getUint32(4)
      const bytes = new Uint8Array(event.data, 8)
      const skip = Math.max(0, offset - at)
      if (skip >= bytes.length) return
      offset = at + bytes.length
      term.write(bytes.subarray(skip))
    }
    ws.onclose = (event) => {
      if (socket !== ws) return
      socket = null
      if (event.code === 1000 || event.code === 4401 || event.code === 4403 || event.code === 4404) {
        if (status.textContent === 'attached') status.textContent = 'closed (' + event.code + ')'
        return
      }
      status.textContent = 'reconnecting'
      setTimeout(connect, Math.min(200 * 2 ** retries++, 5000))
    }
  }

  const encoder = new TextEncoder()
  term.onData((data) => { if (socket && socket.readyState === 1) socket.send(encoder.encode(data)) })
  term.onBinary((data) => {
    if (socket && socket.readyState === 1) socket.send(Uint8Array.from(data, (c) => c.charCodeAt(0)))
  })
  term.onResize(sendResize)
  new ResizeObserver(() => fit.fit()).observe(document.getElementById('term'))
  connect()
})()
</script>
</body>
</html>
`
