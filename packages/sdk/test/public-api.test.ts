import type * as protocol from '@conch/protocol'
import { describe, expectTypeOf, it } from 'vitest'
import type {
  AccessToken,
  BackgroundProcess,
  CommandResult,
  ErrorCode,
  ErrorDetails,
  ExposedPort,
  FileInfo,
  HistoryEntry,
  ListeningPort,
  PortEvent,
  ProcessInfo,
  Sandbox,
  SandboxInfo,
  SessionInfo,
  Shell,
  ShellEvent,
} from '../src/index.ts'
import * as sdk from '../src/index.ts'

// Type tests for the public surface: `tsc` fails when a signature drifts. The runtime half
// checks the list of value exports, so adding or dropping one is a visible decision.

describe('public API types', () => {
  it('mirrors the protocol records exactly', () => {
    expectTypeOf<SandboxInfo>().toEqualTypeOf<protocol.SandboxInfo>()
    expectTypeOf<SessionInfo>().toEqualTypeOf<protocol.SessionInfo>()
    expectTypeOf<ProcessInfo>().toEqualTypeOf<protocol.ProcessInfo>()
    expectTypeOf<FileInfo>().toEqualTypeOf<protocol.FileInfo>()
    expectTypeOf<HistoryEntry>().toEqualTypeOf<protocol.HistoryEntry>()
    expectTypeOf<AccessToken>().toEqualTypeOf<protocol.AccessToken>()
    expectTypeOf<ErrorCode>().toEqualTypeOf<protocol.ErrorCode>()
    expectTypeOf<ListeningPort>().toEqualTypeOf<protocol.ListeningPort>()
    expectTypeOf<ExposedPort>().toEqualTypeOf<protocol.ExposedPort>()
    expectTypeOf<PortEvent>().toEqualTypeOf<protocol.PortEvent>()
    expectTypeOf<ErrorDetails>().toEqualTypeOf<protocol.ErrorDetails>()
  })

  it('types the details of an error by its code', () => {
    expectTypeOf<sdk.ConchError<'TOO_MANY_SESSIONS'>['details']>().toEqualTypeOf<
      Partial<{ limit: number; value: number }>
    >()
    expectTypeOf<sdk.OutputLostError['details']['earliestOffset']>().toEqualTypeOf<number | undefined>()
    expectTypeOf<sdk.RateLimitError['details']['limit']>().toEqualTypeOf<number | undefined>()
    expectTypeOf<sdk.ConchError['suggestion']>().toEqualTypeOf<string>()
  })

  it('types sandbox construction and listing', () => {
    expectTypeOf(sdk.Sandbox.create).returns.resolves.toEqualTypeOf<Sandbox>()
    expectTypeOf(sdk.Sandbox.connect).parameters.toEqualTypeOf<[string, sdk.ConnectOptions]>()
    expectTypeOf(sdk.Sandbox.list).returns.resolves.toEqualTypeOf<SandboxInfo[]>()
    expectTypeOf<Sandbox>().toHaveProperty(Symbol.asyncDispose)
    expectTypeOf<Shell>().toHaveProperty(Symbol.asyncDispose)
  })

  // Checked by tsc; never called.
  function encodings(sh: Shell, sb: Sandbox): void {
    expectTypeOf(sh.run('ls')).resolves.toEqualTypeOf<CommandResult<string>>()
    expectTypeOf(sh.run('ls', { encoding: 'binary' })).resolves.toEqualTypeOf<CommandResult<Uint8Array>>()
    expectTypeOf(sb.exec('ls')).resolves.toEqualTypeOf<CommandResult<string>>()
    expectTypeOf(sb.exec('ls', { encoding: 'binary' })).resolves.toEqualTypeOf<CommandResult<Uint8Array>>()
    expectTypeOf(sb.files.read('/a')).resolves.toEqualTypeOf<string>()
    expectTypeOf(sb.files.read('/a', { encoding: 'binary' })).resolves.toEqualTypeOf<Uint8Array>()
    sh.run('ls', { onStdout: (chunk) => expectTypeOf(chunk).toEqualTypeOf<string>() })
    sh.run('ls', { encoding: 'binary', onStdout: (chunk) => expectTypeOf(chunk).toEqualTypeOf<Uint8Array>() })
    expectTypeOf(sh.stream('make')).toEqualTypeOf<AsyncIterableIterator<ShellEvent<string>>>()
    expectTypeOf(sh.stream('make', { encoding: 'binary' })).toEqualTypeOf<
      AsyncIterableIterator<ShellEvent<Uint8Array>>
    >()
  }

  it('returns text by default and bytes with the binary encoding', () => {
    expectTypeOf(encodings).toBeFunction()
  })

  it('streams typed events ending in exit', () => {
    expectTypeOf<ShellEvent>().toEqualTypeOf<
      | { type: 'stdout'; data: string }
      | { type: 'stderr'; data: string }
      | { type: 'exit'; exitCode: number; timedOut: boolean; oomKilled: boolean; durationMs: number }
    >()
  })

  it('types result fields', () => {
    expectTypeOf<CommandResult>().toMatchTypeOf<{
      stdout: string
      stderr: string
      exitCode: number
      timedOut: boolean
      oomKilled: boolean
      truncated: boolean
      durationMs: number
    }>()
  })

  it('gives errors a code and the branching facts', () => {
    expectTypeOf<sdk.ConchError['code']>().toEqualTypeOf<ErrorCode>()
    expectTypeOf<sdk.ShellClosedError['exitCode']>().toEqualTypeOf<number | null>()
    expectTypeOf<sdk.ShellClosedError['signal']>().toEqualTypeOf<string | null>()
    expectTypeOf<sdk.OutputLostError['earliestOffset']>().toEqualTypeOf<number | undefined>()
    expectTypeOf<sdk.ShellClosedError>().toMatchTypeOf<sdk.ConchError>()
  })

  it('types sessions, processes and tokens', () => {
    expectTypeOf<Sandbox['createSession']>().returns.resolves.toEqualTypeOf<sdk.Session>()
    expectTypeOf<Sandbox['startProcess']>().returns.resolves.toEqualTypeOf<BackgroundProcess>()
    expectTypeOf<Sandbox['listProcesses']>().returns.resolves.toEqualTypeOf<BackgroundProcess[]>()
    expectTypeOf<Sandbox['createAccessToken']>().returns.resolves.toEqualTypeOf<AccessToken>()
    expectTypeOf<Shell['env']['get']>().returns.resolves.toEqualTypeOf<string | null>()
    expectTypeOf<Shell['history']>().returns.resolves.toEqualTypeOf<HistoryEntry[]>()
  })

  it('accepts the standard WebSocket, the ws package and fetch as injected implementations', async () => {
    const ws = await import('ws')
    const standard: sdk.WebSocketConstructor = globalThis.WebSocket
    const fromWs: sdk.WebSocketConstructor = ws.WebSocket
    const fetchImpl: sdk.FetchLike = globalThis.fetch
    expectTypeOf(standard).toEqualTypeOf<sdk.WebSocketConstructor>()
    expectTypeOf(fromWs).toEqualTypeOf<sdk.WebSocketConstructor>()
    expectTypeOf(fetchImpl).toEqualTypeOf<sdk.FetchLike>()
  })
})

describe('public API values', () => {
  it('exports exactly the documented values', async () => {
    const { expect } = await import('vitest')
    expect(Object.keys(sdk).sort()).toEqual([
      'AuthError',
      'BackgroundProcess',
      'ConchError',
      'ConnectionError',
      'DeadlineError',
      'OutputLostError',
      'RateLimitError',
      'Sandbox',
      'SandboxFiles',
      'SandboxNotFoundError',
      'Session',
      'SessionAliases',
      'SessionEnv',
      'SessionNotFoundError',
      'Shell',
      'ShellClosedError',
      'Terminal',
    ])
  })
})
