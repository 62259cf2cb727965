import {
  AccessToken,
  AliasMap,
  EnvMap,
  EnvValue,
  ExecEvent,
  FileInfo,
  FileList,
  HistoryList,
  Ok,
  ProcessInfo,
  ProcessList,
  ProcessOutput,
  RunResult,
  SandboxInfo,
  SandboxList,
  SessionInfo,
  SessionList,
  SnapshotInfo,
  SnapshotList,
} from '@conch/protocol'
import { check, type Shape } from '@conch/protocol/json-shape'
import { describe, expect, it } from 'vitest'
import type { z } from 'zod'
import { mutations } from '../test/mutations.ts'
import * as shapes from './rest-shapes.ts'

// Each REST shape accepts and rejects exactly what the protocol schema it mirrors does, on a
// valid sample and on every single-field mutation of it.

const sandbox = {
  id: 'sb_abcdef123456',
  status: 'running',
  driver: 'local',
  isolation: 'none',
  description: 'no isolation',
  workdir: '/workspace',
  limits: { memoryBytes: 1024, cpus: 0.5, pids: 10, diskBytes: 2048 },
  metadata: { team: 'a' },
  createdAt: 1,
  deadReason: null,
  idleTimeoutMs: 1_800_000,
  hibernateAfterMs: 600_000,
  sessionIdleTimeoutMs: null,
  lastActivityAt: 5,
  keepAliveUntil: null,
}
const session = {
  id: 'build',
  status: 'closed',
  cwd: '/workspace',
  commandTimeoutMs: 30_000,
  cleanEnv: false,
  pid: 12,
  createdAt: 2,
  offset: 10,
  running: 'r1',
  queued: 0,
  closed: { code: 7, signal: null, reason: 'exit 7' },
}
const proc = {
  id: 'proc_abcd1234',
  pid: 99,
  command: 'sleep 1',
  status: 'exited',
  exitCode: 0,
  signal: null,
  startedAt: 3,
  endedAt: 4,
  offset: 0,
}
const file = { path: '/workspace/a', name: 'a', type: 'file', size: 2, mode: 420, mtimeMs: 5 }
const result = {
  stdout: 'a',
  stderr: '',
  encoding: 'utf8',
  exitCode: 0,
  timedOut: false,
  truncated: false,
  stdoutBytes: 1,
  stderrBytes: 0,
  durationMs: 0.5,
}

const snapshot = {
  id: 'snap_ABCDEFGHIJ0123456789',
  name: 'before',
  sandboxId: 'sb_abcdef123456',
  createdAt: 6,
  formatVersion: 1,
  sessions: ['default', 'build'],
  entries: 3,
  workspaceBytes: 100,
  storedBytes: 40,
  processes: [{ command: 'sleep 9', cwd: '/workspace', running: true }],
}
const forked = {
  ...sandbox,
  restoredFrom: {
    snapshotId: snapshot.id,
    sessions: [{ id: 'default', problems: ['variable X'] }],
    processesRestarted: 1,
  },
}

const cases: [string, Shape<unknown>, z.ZodType, unknown][] = [
  ['SandboxInfo', shapes.sandboxInfo, SandboxInfo, sandbox],
  ['SandboxInfo of a fork', shapes.sandboxInfo, SandboxInfo, forked],
  ['SnapshotInfo', shapes.snapshotInfo, SnapshotInfo, snapshot],
  ['SnapshotList', shapes.snapshotList, SnapshotList, { snapshots: [snapshot] }],
  ['SandboxList', shapes.sandboxList, SandboxList, { sandboxes: [sandbox] }],
  [
    'AccessToken',
    shapes.accessToken,
    AccessToken,
    { token: 'cst_x', sandboxId: 'sb_abcdef123456', expiresAt: 9 },
  ],
  ['RunResult', shapes.runResult, RunResult, result],
  [
    'RunResult killed by the memory limit',
    shapes.runResult,
    RunResult,
    { ...result, exitCode: 137, oomKilled: true },
  ],
  ['SessionInfo', shapes.sessionInfo, SessionInfo, session],
  ['SessionList', shapes.sessionList, SessionList, { sessions: [session] }],
  ['EnvMap', shapes.envMap, EnvMap, { env: { A: '1' } }],
  ['EnvValue', shapes.envValue, EnvValue, { name: 'A', value: null }],
  ['AliasMap', shapes.aliasMap, AliasMap, { aliases: { ll: 'ls -l' } }],
  [
    'HistoryList',
    shapes.historyList,
    HistoryList,
    { entries: [{ index: 0, command: 'ls', startedAt: 1, exitCode: 0, durationMs: 1.5 }] },
  ],
  ['ProcessInfo', shapes.processInfo, ProcessInfo, proc],
  ['ProcessList', shapes.processList, ProcessList, { processes: [proc] }],
  [
    'ProcessOutput',
    shapes.processOutput,
    ProcessOutput,
    { stdout: 'a', stderr: 'b', encoding: 'base64', nextOffset: 3, status: 'running' },
  ],
  ['FileInfo', shapes.fileInfo, FileInfo, file],
  ['FileList', shapes.fileList, FileList, { entries: [file] }],
  ['Ok', shapes.okBody, Ok, { ok: true }],
  ['ExecEvent stdout', shapes.execEvent, ExecEvent, { type: 'stdout', data: 'aGk=', offset: 0 }],
  [
    'ExecEvent exit',
    shapes.execEvent,
    ExecEvent,
    { type: 'exit', exitCode: 0, timedOut: false, durationMs: 1 },
  ],
  [
    'ExecEvent exit killed by the memory limit',
    shapes.execEvent,
    ExecEvent,
    { type: 'exit', exitCode: 137, timedOut: false, durationMs: 1, oomKilled: true },
  ],
  ['ExecEvent error', shapes.execEvent, ExecEvent, { type: 'error', code: 'INTERNAL', message: 'm' }],
]

describe('REST shapes', () => {
  for (const [name, shape, schema, sample] of cases) {
    it(`reads ${name} like the protocol schema, on the sample and every mutation of it`, () => {
      expect(check(shape, sample)).toEqual(schema.parse(sample))
      for (const m of mutations(sample)) {
        const wire = JSON.parse(JSON.stringify(m.value))
        expect(check(shape, wire) !== undefined, `${name} with ${m.path} → ${JSON.stringify(wire)}`).toBe(
          schema.safeParse(wire).success,
        )
      }
    })
  }
})
