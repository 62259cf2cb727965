// deploy/systemd/conch-runner.service, checked by systemd's own parser: `systemd-analyze
// verify` in a scratch root holding the unit, systemd's units and a stand-in `conch` binary
// (verify checks that ExecStart exists). The machine may not run systemd as PID 1, so the unit
// is parsed and verified, not started; its promises are checked as parsed settings.
import { spawnSync } from 'node:child_process'
import { chmodSync, cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, describe, expect, test } from 'vitest'

const UNIT = fileURLToPath(new URL('../../deploy/systemd/conch-runner.service', import.meta.url))
const root = mkdtempSync(join(tmpdir(), 'conch-unit-'))
afterAll(() => rmSync(root, { recursive: true, force: true }))

/** Verifies `text` as conch-runner.service in the scratch root; returns the exit code and stderr. */
function verify(text: string): { code: number; stderr: string } {
  mkdirSync(join(root, 'usr/local/bin'), { recursive: true })
  mkdirSync(join(root, 'etc/systemd/system'), { recursive: true })
  mkdirSync(join(root, 'usr/lib'), { recursive: true })
  cpSync('/usr/lib/systemd', join(root, 'usr/lib/systemd'), { recursive: true })
  writeFileSync(join(root, 'usr/local/bin/conch'), '#!/bin/sh\n')
  chmodSync(join(root, 'usr/local/bin/conch'), 0o755)
  writeFileSync(join(root, 'etc/systemd/system/conch-runner.service'), text)
  const r = spawnSync('systemd-analyze', ['verify', `--root=${root}`, 'conch-runner.service'], {
    encoding: 'utf8',
  })
  if (r.error) throw new Error(`systemd-analyze: ${r.error.message}; apt-get install systemd`)
  return { code: r.status ?? 1, stderr: r.stderr }
}

/** The unit's settings, as `systemd-analyze` would read them (last assignment wins). */
function settings(text: string): Map<string, string> {
  const out = new Map<string, string>()
  for (const line of text.split('\n')) {
    const m = /^([A-Za-z]+)=(.*)$/.exec(line)
    if (m?.[1] && m[2] !== undefined) out.set(m[1], m[2])
  }
  return out
}

describe('systemd unit', () => {
  const text = readFileSync(UNIT, 'utf8')

  test('verifies clean with systemd-analyze', () => {
    expect(verify(text)).toEqual({ code: 0, stderr: '' })
  })

  test('reports a setting systemd cannot parse, so the clean verify means something', () => {
    expect(verify(text.replace(/^KillMode=process$/m, 'KillMode=bogus')).stderr).toMatch(/kill mode/i)
  })

  test('keeps agents across a runner restart and delegates its cgroup', () => {
    const s = settings(text)
    expect(s.get('KillMode')).toBe('process')
    expect(s.get('Delegate')).toBe('yes')
    expect(s.get('EnvironmentFile')).toBe('/etc/conch/runner.env')
    expect(s.get('CapabilityBoundingSet')).toContain('CAP_SYS_ADMIN')
    // Settings that would stop sandboxes from starting stay out.
    for (const breaking of [
      'PrivateDevices',
      'ProtectControlGroups',
      'RestrictNamespaces',
      'NoNewPrivileges',
      'ProtectClock',
      'ProtectHostname',
      'SystemCallFilter',
    ])
      expect(s.has(breaking), breaking).toBe(false)
  })
})
