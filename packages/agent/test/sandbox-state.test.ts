import { mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test as base, describe, expect } from 'vitest'
import { AgentError } from '../src/agent-error.ts'
import { BackgroundProcesses } from '../src/background-processes.ts'
import type { BashSession } from '../src/bash-session.ts'
import { systemClock } from '../src/clock.ts'
import { silentLogger } from '../src/logger.ts'
import { ProcessTable } from '../src/process-tree.ts'
import { SandboxState } from '../src/sandbox-state.ts'
import { SessionManager } from '../src/session-manager.ts'
import { isShellOwnedVariable } from '../src/shell-state-capture.ts'
import { nodeSpawn } from '../src/spawner.ts'
import { chooseTempRoot } from '../src/temp-root.ts'

/** One sandbox's agent parts against real bash, in its own workspace root. */
interface Box {
  root: string
  sessions: SessionManager
  processes: BackgroundProcesses
  state: SandboxState
}

const test = base.extend<{ box: () => Box }>({
  // biome-ignore lint/correctness/noEmptyPattern: vitest fixtures take a destructuring pattern
  box: async ({}, use) => {
    const dir = mkdtempSync(join(tmpdir(), 'conch-state-'))
    const boxes: Box[] = []
    await use(() => {
      const root = join(dir, `root${boxes.length}`)
      mkdirSync(join(root, 'sub', 'deeper'), { recursive: true })
      const sessions = new SessionManager({
        baseEnv: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: root, LANG: 'C.UTF-8' },
        root,
        resolveDir: (d) => (d.startsWith('/') ? d : join(root, d)),
        spawn: nodeSpawn,
        clock: systemClock,
        logger: silentLogger,
        processTable: new ProcessTable(systemClock),
        tempRoot: chooseTempRoot(),
        killGraceMs: 300,
      })
      const processes = new BackgroundProcesses(nodeSpawn, systemClock)
      const box = { root, sessions, processes, state: new SandboxState(sessions, processes, root) }
      boxes.push(box)
      return box
    })
    for (const b of boxes) {
      b.processes.killAll()
      await b.sessions.closeAll()
    }
    rmSync(dir, { recursive: true, force: true })
  },
})

let runs = 0
async function sh(session: BashSession, command: string): Promise<{ out: string; code: number }> {
  runs += 1
  const r = await session.run({ runId: `r${runs}`, command })
  return { out: r.stdout.toString(), code: r.exitCode }
}

/** Every piece of shell state the issue names, read with bash's own commands, workspace paths made relative. */
async function observe(session: BashSession, root: string): Promise<Record<string, string>> {
  const probes: Record<string, string> = {
    pwd: 'pwd',
    oldpwd: 'echo "$OLDPWD"',
    dirs: 'dirs -l -p',
    umask: 'umask',
    functions: 'declare -f',
    aliases: 'alias -p',
    shopt: 'shopt -p',
    set: 'set +o',
    traps: 'trap -p',
    names: 'compgen -v',
    exported: 'compgen -e',
  }
  const seen: Record<string, string> = {}
  for (const [key, command] of Object.entries(probes)) {
    let out = (await sh(session, command)).out
      .replaceAll(root, '<root>')
      .replace(/__conch_(\*|\w+?)_[0-9a-f]{8}\b/g, '__conch_$1_<tag>')
      // The trap guard names the session's own command file, which differs between sandboxes.
      .replace(/\/conch-\w+\/cmd\b/g, '/conch-<dir>/cmd')
    if (key === 'names' || key === 'exported') {
      out = out
        .split('\n')
        .filter((n) => n !== '' && !isShellOwnedVariable(n))
        .sort()
        .join('\n')
    }
    seen[key] = out
  }
  for (const name of ['plain', 'exported', 'multi', 'arr', 'assoc', 'num', 'frozen', 'ref', 'PATH', 'IFS']) {
    seen[`declare ${name}`] = (await sh(session, `declare -p ${name}`)).out.replaceAll(root, '<root>')
  }
  return seen
}

const STATEFUL = [
  'cd sub && pushd deeper >/dev/null && pushd -n "$HOME" >/dev/null',
  'plain="just here"; export exported=$\'line1\\nline2 "quoted" $dollar\'',
  'multi=$\'a\\tb\\nc\'; declare -a arr=(1 "two words" $\'x\\ny\'); declare -A assoc=([k]=v ["a b"]=c)',
  'declare -i num=41+1; readonly frozen=ice; declare -n ref=plain; unset HOME',
  'greet() { echo "hello $1"; }; export -f greet; fixed() { return 3; }; readonly -f fixed',
  "alias ll='ls -l'; alias say='echo said'",
  'set -o pipefail -o noclobber; shopt -s extglob nullglob; shopt -u sourcepath',
  "trap 'echo usr1' USR1; trap 'echo bye' EXIT; umask 0027",
  'false',
]

describe('shell state: capture in one sandbox, restore in another', () => {
  test('restores cwd, variables, functions, aliases, options, traps, directory stack and umask', async ({
    box,
  }) => {
    const a = box()
    const shell = await a.sessions.create({ id: 'work' })
    for (const command of STATEFUL) await sh(shell, command)
    const before = await observe(shell, a.root)
    const captured = await a.state.capture()

    const b = box()
    const restored = await b.state.restore(captured, false)
    expect(restored).toEqual([{ id: 'work', problems: [] }])
    const after = await observe(await b.sessions.get('work'), b.root)
    expect(after).toEqual(before)
    expect(before.pwd).toBe('<root>/sub/deeper\n')
    expect(before['declare frozen']).toBe('declare -r frozen="ice"\n')
  })

  test('keeps the history, $? and the session options, and the state query adds no history', async ({
    box,
  }) => {
    const a = box()
    const shell = await a.sessions.create({ id: 'hist', commandTimeoutMs: 12_345 })
    for (const command of ['echo one', 'x=2', 'exit_code() { return 7; }', 'exit_code'])
      await sh(shell, command)
    const captured = await a.state.capture()
    const b = box()
    await b.state.restore(captured, false)
    const copy = await b.sessions.get('hist')
    expect(copy.history().map((e) => [e.index, e.command, e.exitCode])).toEqual(
      shell.history().map((e) => [e.index, e.command, e.exitCode]),
    )
    expect(copy.commandTimeoutMs).toBe(12_345)
    expect((await sh(copy, 'echo $?')).out).toBe('7\n')
    expect(copy.history().at(-1)?.index).toBe(4)
  })

  test('restores the state of every session, and each diverges on its own', async ({ box }) => {
    const a = box()
    await sh(await a.sessions.get('default'), 'export WHO=default')
    await sh(await a.sessions.create({ id: 'second' }), 'export WHO=second; cd sub')
    const captured = await a.state.capture()
    const forks = [box(), box(), box()]
    for (const f of forks) await f.state.restore(captured, false)
    await sh(await forks[0]!.sessions.get('default'), 'WHO=changed')
    const who = await Promise.all(
      forks.map(async (f) => (await sh(await f.sessions.get('default'), 'echo $WHO')).out),
    )
    expect(who).toEqual(['changed\n', 'default\n', 'default\n'])
    expect((await sh(await forks[2]!.sessions.get('second'), 'echo $WHO; pwd')).out).toBe(
      `second\n${forks[2]!.root}/sub\n`,
    )
  })

  test('lists background processes and restarts the running ones only on request', async ({ box }) => {
    const a = box()
    a.processes.start({ command: 'sleep 30', cwd: join(a.root, 'sub'), env: { PATH: '/usr/bin:/bin' } })
    const captured = await a.state.capture()
    expect(captured.processes).toEqual([
      { command: 'sleep 30', cwd: '/workspace/sub', env: { PATH: '/usr/bin:/bin' }, running: true },
    ])
    const quiet = box()
    await quiet.state.restore(captured, false)
    expect(quiet.processes.list()).toEqual([])
    const restarted = box()
    await restarted.state.restore(captured, true)
    expect(restarted.processes.list().map((p) => [p.command, p.status])).toEqual([['sleep 30', 'running']])
  })
})

describe('attacks: hostile shell state', () => {
  test('a DEBUG trap that prints and nounset neither spoil the capture nor break the restored framing', async ({
    box,
  }) => {
    const a = box()
    const shell = await a.sessions.create({ id: 'evil' })
    await sh(shell, 'trap \'echo debug-noise; printf "var\\0PATH\\0declare -x PATH=/evil\\0"\' DEBUG')
    // functrace: bash shows a DEBUG trap to sourced scripts (the capture is one) only with it on.
    await sh(shell, 'set -uT; export KEEP=1')
    const captured = await a.state.capture()
    const path = captured.sessions[0]!.variables.find((v) => v.name === 'PATH')
    expect(path?.declaration).not.toContain('/evil')
    const b = box()
    const [restored] = await b.state.restore(captured, false)
    expect(restored?.problems).toEqual([])
    const copy = await b.sessions.get('evil')
    const r = await sh(copy, 'echo "$KEEP"; echo "$UNSET_HERE"')
    expect(r.code).toBe(1)
    expect(r.out).toContain('debug-noise\n')
    expect(r.out.replaceAll(/debug-noise\n|var\0PATH\0declare -x PATH=\/evil\0/g, '')).toBe('1\n')
    expect(copy.closedInfo).toBeNull()
    expect((await sh(copy, 'echo still-here')).out).toContain('still-here')
  })

  test('tampered state runs nothing outside the restored shell and keeps the framing: names and declarations are checked', async ({
    box,
  }) => {
    const a = box()
    const shell = await a.sessions.create({ id: 'tamper' })
    const captured = await a.state.capture()
    const state = captured.sessions[0]!
    const marker = join(a.root, 'pwned')
    state.variables.push(
      { name: 'x', declaration: `declare -- y="1"; touch ${marker}` },
      { name: 'BASHOPTS', declaration: 'declare -r BASHOPTS="nope"' },
    )
    state.functions.push({ name: '__conch_end_00000000', definition: '__conch_end_00000000 () { :; }' })
    state.functions.push({ name: 'bad name; touch x', definition: 'f () { :; }' })
    state.aliases.push(["a'b", 'echo'])
    const b = box()
    const [restored] = await b.state.restore(captured, false)
    expect(restored?.problems).toEqual([
      'variable x was not restored',
      'variable BASHOPTS was not restored',
      'function __conch_end_00000000 was not restored',
      'function bad name; touch x was not restored',
    ])
    const copy = await b.sessions.get('tamper')
    expect((await sh(copy, 'test -e pwned; echo $?')).out).toBe('1\n')
    expect(
      (await sh(copy, 'printf "\\037C%s\\036" 0123456789abcdef0123456789abcdef; echo done')).out,
    ).toContain('done')
    void shell
  })
})

describe('busy sessions', () => {
  test('a session that keeps running a command fails the capture with SESSION_BUSY, naming the run', async ({
    box,
  }) => {
    const a = box()
    const shell = await a.sessions.create({ id: 'busy' })
    const long = shell.run({ runId: 'long-one', command: 'sleep 3' })
    const error = await new SandboxState(a.sessions, a.processes, a.root, 200)
      .capture()
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(AgentError)
    expect((error as AgentError).code).toBe('SESSION_BUSY')
    expect((error as AgentError).message).toContain('run "long-one"')
    shell.interrupt()
    await long
    expect((await sh(shell, 'echo fine')).out).toBe('fine\n')
  })
})

describe('options', () => {
  test('options the snapshot had off stay off, whatever a fresh shell has on', async ({ box }) => {
    const a = box()
    const shell = await a.sessions.create({ id: 'bare' })
    await sh(
      shell,
      'shopt -u $(shopt -s | while read -r o _; do [[ $o == expand_aliases ]] || printf "%s " "$o"; done)',
    )
    await sh(shell, 'set +o braceexpand +o hashall')
    const before = [(await sh(shell, 'shopt -p')).out, (await sh(shell, 'set +o')).out]
    const b = box()
    await b.state.restore(await a.state.capture(), false)
    const copy = await b.sessions.get('bare')
    expect([(await sh(copy, 'shopt -p')).out, (await sh(copy, 'set +o')).out]).toEqual(before)
    expect(before[0]).toContain('shopt -u cmdhist')
  })
})
