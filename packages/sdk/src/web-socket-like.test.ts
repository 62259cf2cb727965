import { execFileSync } from 'node:child_process'
import { pathToFileURL } from 'node:url'
import { afterEach, describe, expect, it } from 'vitest'
import { WebSocket as WsWebSocket } from 'ws'
import { resolveWebSocket, type WebSocketConstructor } from './web-socket-like.ts'

// Which WebSocket the SDK takes on which runtime. On Node it prefers the optional `ws` peer
// (cheaper per message than undici's global) when it is installed; Bun, Deno and browsers keep
// their global; Node 20 (no global) needs `ws`. These tests swap the global and the runtime's
// name to walk each path on this Node, and load the module in a child Node whose resolver hides
// `ws` (or gives an old one) for the paths where it is missing.

const originalWebSocket = Object.getOwnPropertyDescriptor(globalThis, 'WebSocket')

/** A stand-in global WebSocket, so a test can tell it from ws. */
class GlobalWebSocket {}

afterEach(() => {
  if (originalWebSocket) Object.defineProperty(globalThis, 'WebSocket', originalWebSocket)
  else Reflect.deleteProperty(globalThis, 'WebSocket')
  Reflect.deleteProperty(process.versions, 'bun')
  Reflect.deleteProperty(process.versions, 'deno')
})

const setGlobal = (value: unknown): void => {
  Object.defineProperty(globalThis, 'WebSocket', { value, configurable: true, writable: true })
}

/** Runs resolveWebSocket in a child Node where `ws` resolves to `wsSource` (or not at all). */
function resolveInChild(wsSource: string | null): string {
  const moduleUrl = pathToFileURL(`${import.meta.dirname}/web-socket-like.ts`).href
  const fake = wsSource === null ? null : `data:text/javascript,${encodeURIComponent(wsSource)}`
  const script = `
    import { registerHooks } from 'node:module'
    registerHooks({ resolve(specifier, context, next) {
      if (specifier !== 'ws') return next(specifier, context)
      if (${JSON.stringify(fake)} === null) throw Object.assign(new Error('no ws'), { code: 'ERR_MODULE_NOT_FOUND' })
      return { url: ${JSON.stringify(fake)}, shortCircuit: true }
    } })
    const { resolveWebSocket } = await import(${JSON.stringify(moduleUrl)})
    const ctor = await resolveWebSocket()
    console.log(ctor === globalThis.WebSocket ? 'global' : ctor.name)
  `
  return execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' }).trim()
}

describe('resolveWebSocket', () => {
  it('prefers an injected constructor', async () => {
    const injected = GlobalWebSocket as unknown as WebSocketConstructor
    expect(await resolveWebSocket(injected)).toBe(injected)
  })

  it('takes ws over the global WebSocket on Node', async () => {
    setGlobal(GlobalWebSocket)
    expect(await resolveWebSocket()).toBe(WsWebSocket)
  })

  it.for(['bun', 'deno'])(
    'keeps the global WebSocket on %s, which reports a Node version too',
    async (runtime) => {
      setGlobal(GlobalWebSocket)
      Object.defineProperty(process.versions, runtime, { value: '1.0.0', configurable: true })
      expect(await resolveWebSocket()).toBe(GlobalWebSocket)
    },
  )

  it('falls back to ws on a runtime without a global WebSocket', async () => {
    setGlobal(undefined)
    expect(await resolveWebSocket()).toBe(WsWebSocket)
    Object.defineProperty(process.versions, 'bun', { value: '1.0.0', configurable: true })
    expect(await resolveWebSocket()).toBe(WsWebSocket)
  })

  it('uses the global WebSocket on Node when ws is not installed', () => {
    expect(resolveInChild(null)).toBe('global')
  })

  it('does not prefer a ws older than 8 (no named WebSocket export) over the global', () => {
    expect(resolveInChild('export default class OldWs {}')).toBe('global')
  })

  it('says what to install when there is neither a global nor ws', async () => {
    setGlobal(undefined)
    const script = `
      import { registerHooks } from 'node:module'
      registerHooks({ resolve(s, c, next) {
        if (s === 'ws') throw Object.assign(new Error('no ws'), { code: 'ERR_MODULE_NOT_FOUND' })
        return next(s, c)
      } })
      delete globalThis.WebSocket
      const { resolveWebSocket } = await import(${JSON.stringify(pathToFileURL(`${import.meta.dirname}/web-socket-like.ts`).href)})
      await resolveWebSocket().then(() => console.log('resolved'), (e) => console.log(e.code, e.message))
    `
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' })
    expect(out).toMatch(/^CONNECTION_\w+ no WebSocket implementation: .*npm install ws/)
  })
})
