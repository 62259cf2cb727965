// The operator's hosts file: what it accepts, and that it refuses passwords, key material,
// relative paths and ambiguous authentication with a one-line ConfigError.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { ConfigError } from '../config-error.ts'
import { loadSshHosts } from './ssh-hosts.ts'

const dir = mkdtempSync(join(tmpdir(), 'conch-ssh-hosts-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

function load(content: unknown): ReturnType<typeof loadSshHosts> {
  const file = join(dir, 'hosts.json')
  writeFileSync(file, typeof content === 'string' ? content : JSON.stringify(content))
  return loadSshHosts(file)
}

const base = { address: 'gpu.internal', user: 'conch', privateKeyFile: '/etc/conch/id_ed25519' }

describe('loadSshHosts', () => {
  it('reads named hosts with port 22 by default', () => {
    const hosts = load({
      hosts: { gpu: base, build: { ...base, port: 2222, agent: true, privateKeyFile: undefined } },
    })
    expect(hosts.get('gpu')).toMatchObject({ address: 'gpu.internal', port: 22, user: 'conch' })
    expect(hosts.get('build')).toMatchObject({ port: 2222, agent: true })
  })

  it.each([
    ['a password field', { hosts: { gpu: { ...base, password: 'hunter2' } } }],
    ['key material instead of a file', { hosts: { gpu: { ...base, privateKey: '-----BEGIN' } } }],
    ['a relative key path', { hosts: { gpu: { ...base, privateKeyFile: 'id_ed25519' } } }],
    ['both a key file and the agent', { hosts: { gpu: { ...base, agent: true } } }],
    ['neither a key file nor the agent', { hosts: { gpu: { address: 'a', user: 'u' } } }],
    ['an upper-case host name', { hosts: { GPU: base } }],
    ['not JSON', '{hosts:'],
  ])('refuses %s', (_what, content) => {
    expect(() => load(content)).toThrow(ConfigError)
  })

  it('never repeats a value of the file in its error', () => {
    try {
      load({ hosts: { gpu: { ...base, password: 'hunter2-secret' } } })
      expect.unreachable()
    } catch (error) {
      expect((error as Error).message).not.toContain('hunter2-secret')
    }
  })
})
