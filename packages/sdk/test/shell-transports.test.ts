import { execFile } from 'node:child_process'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { promisify } from 'node:util'
import { encodeOutputFrame } from '@conch/protocol'
import { describe, expect, test } from 'vitest'
import { WebSocket as WsWebSocket } from 'ws'
import { Sandbox, type WebSocketConstructor } from '../src/index.ts'
import { FakeRunner } from './fake-runner.ts'

// A shell over each WebSocket the SDK takes on Node: `ws` (its default there when installed)
// and the global (undici, the default without ws). A hostile runner (fake-runner.ts, real
// sockets) sends frames that break the protocol at each layer: a frame the SDK cannot read must
// close the shell with a typed INVALID_FRAME, and bytes that break the WebSocket framing itself
// must drop the socket, which the shell dials again; neither may crash the client.

const execFileAsync = promisify(execFile)

const transports: [string, WebSocketConstructor][] = [
  ['ws', WsWebSocket],
  ['the global WebSocket (undici)', globalThis.WebSocket as unknown as WebSocketConstructor],
]

/** Resolves once `predicate` holds, checking after every event-loop turn. */
async function until(predicate: () => boolean): Promise<void> {
  while (!predicate()) await new Promise((r) => setImmediate(r))
}

/** An unmasked server frame: FIN, `opcode`, a payload shorter than 126 bytes. */
function wsFrame(opcode: number, payload: Uint8Array, firstByte = 0x80 | opcode): Uint8Array {
  return new Uint8Array([firstByte, payload.length, ...payload])
}

const hostileFrames: [string, (runner: FakeRunner) => void][] = [
  ['text that is not JSON', (r) => r.sendRaw('{"type":"shell_exit",')],
  ['a JSON array', (r) => r.sendRaw('[1,2]')],
  [
    'a shell_exit with a code past 255',
    (r) => r.sendRaw('{"type":"shell_exit","id":"x","code":256,"timedOut":false,"durationMs":1,"offset":0}'),
  ],
  [
    'a shell_exit with a string offset',
    (r) => r.sendRaw('{"type":"shell_exit","id":"x","code":0,"timedOut":false,"durationMs":1,"offset":"0"}'),
  ],
  [
    'a shell_exit whose id comes from __proto__',
    (r) =>
      r.sendRaw(
        '{"type":"shell_exit","__proto__":{"id":"x"},"code":0,"timedOut":false,"durationMs":1,"offset":0}',
      ),
  ],
  [
    'a shell_start with an id of 129 characters',
    (r) => r.sendRaw(`{"type":"shell_start","id":"${'x'.repeat(129)}","offset":0}`),
  ],
  [
    'a binary frame with a truncated header',
    (r) => r.sendBinary(encodeOutputFrame('stdout', 'r1', 0, new Uint8Array([1])).subarray(0, 4)),
  ],
]

const brokenFraming: [string, Uint8Array][] = [
  ['a text frame of invalid UTF-8', wsFrame(0x1, new Uint8Array([0xc3, 0x28]))],
  ['a reserved opcode', wsFrame(0x3, new Uint8Array([0x41]))],
  ['a frame with RSV bits set (no extension was agreed)', wsFrame(0x1, new TextEncoder().encode('{}'), 0xf1)],
  ['a masked server frame', new Uint8Array([0x81, 0x82, 1, 2, 3, 4, 0x7a ^ 1, 0x7d ^ 2])],
]

describe.for(transports)('a shell over %s', ([_name, WebSocket]) => {
  test('runs commands, and its output and exit codes arrive intact', async () => {
    await using runner = await FakeRunner.start()
    await using sb = await Sandbox.connect(runner.sandboxId, {
      url: runner.url,
      apiKey: runner.apiKey,
      WebSocket,
    })
    await using sh = await sb.shell()
    expect(await sh.run('echo héllo')).toMatchObject({ stdout: 'héllo\n', exitCode: 0 })
    expect(await sh.run('code 7')).toMatchObject({ exitCode: 7 })
    const many = await Promise.all(Array.from({ length: 20 }, (_, i) => sh.run(`echo ${i}`)))
    expect(many.map((r) => r.stdout)).toEqual(Array.from({ length: 20 }, (_, i) => `${i}\n`))
  })

  test.for(hostileFrames)('closes with INVALID_FRAME on %s', async ([_what, send]) => {
    await using runner = await FakeRunner.start()
    await using sb = await Sandbox.connect(runner.sandboxId, {
      url: runner.url,
      apiKey: runner.apiKey,
      WebSocket,
    })
    await using sh = await sb.shell()
    const pending = sh.run('sleep 60000')
    await until(() => runner.session(sh.sessionId).running !== null)
    send(runner)
    await expect(pending).rejects.toMatchObject({ code: 'INVALID_FRAME' })
    expect(sh.isOpen).toBe(false)
    await expect(sh.run('true')).rejects.toMatchObject({ code: 'INVALID_FRAME' })
  })

  test.for(brokenFraming)('drops the socket and dials again on %s', async ([_what, bytes]) => {
    await using runner = await FakeRunner.start()
    await using sb = await Sandbox.connect(runner.sandboxId, {
      url: runner.url,
      apiKey: runner.apiKey,
      WebSocket,
      connection: { reconnectBaseDelayMs: 10, reconnectMaxDelayMs: 50 },
    })
    await using sh = await sb.shell()
    const pending = sh.run('sleep 60000')
    await until(() => runner.session(sh.sessionId).running !== null)
    runner.sendRawBytes(bytes)
    await until(() => runner.connections === 2 && sh.isOpen)
    await sh.interrupt()
    expect((await pending).exitCode).toBe(130)
    expect((await sh.run('echo after')).stdout).toBe('after\n')
  })
})

describe('a runtime with no WebSocket at all', () => {
  test('still works over REST, and its first shell says what to install', async () => {
    await using runner = await FakeRunner.start()
    // A child Node whose resolver hides `ws` and which has no global WebSocket: the handle
    // resolves its WebSocket when it is made, and that failure must not surface as an
    // unhandled rejection (which would end the process) before a shell asks for it.
    const script = `
      import { registerHooks } from 'node:module'
      registerHooks({ resolve(s, c, next) {
        if (s === 'ws') throw Object.assign(new Error('no ws'), { code: 'ERR_MODULE_NOT_FOUND' })
        return next(s, c)
      } })
      delete globalThis.WebSocket
      const { Sandbox } = await import(${JSON.stringify(pathToFileURL(join(import.meta.dirname, '../src/index.ts')).href)})
      const sb = await Sandbox.connect(process.env.SB, { url: process.env.RUNNER_URL, apiKey: process.env.KEY })
      // A REST round trip: the failed resolve has settled by then, and REST works without it.
      const info = await sb.refresh()
      console.log('rest', info.id === process.env.SB)
      await sb.shell().then(() => console.log('opened'), (e) => console.log('shell', e.code, e.message))
    `
    const { stdout } = await execFileAsync(
      process.execPath,
      ['--conditions=source', '--input-type=module', '-e', script],
      {
        env: { ...process.env, SB: runner.sandboxId, RUNNER_URL: runner.url, KEY: runner.apiKey },
        encoding: 'utf8',
      },
    )
    expect(stdout).toMatch(/^rest true\nshell CONNECTION_\w+ no WebSocket implementation: .*npm install ws/)
  })
})
