import { afterEach, describe, expect, it } from 'vitest'
import { WebSocket as WsWebSocket } from 'ws'
import { resolveWebSocket, type WebSocketConstructor } from './web-socket-like.ts'

// Node 20 has no global WebSocket; there the SDK imports the optional `ws` peer. These tests
// take the global away to walk that path on any Node.

const original = Object.getOwnPropertyDescriptor(globalThis, 'WebSocket')

afterEach(() => {
  if (original) Object.defineProperty(globalThis, 'WebSocket', original)
})

describe('resolveWebSocket', () => {
  it('prefers an injected constructor', async () => {
    const injected: WebSocketConstructor = WsWebSocket
    expect(await resolveWebSocket(injected)).toBe(injected)
  })

  it('uses globalThis.WebSocket when the runtime has one', async () => {
    Object.defineProperty(globalThis, 'WebSocket', { value: WsWebSocket, configurable: true, writable: true })
    expect(await resolveWebSocket()).toBe(WsWebSocket)
  })

  it('falls back to the ws package without a global WebSocket', async () => {
    Object.defineProperty(globalThis, 'WebSocket', { value: undefined, configurable: true, writable: true })
    expect(await resolveWebSocket()).toBe(WsWebSocket)
  })
})
