// Test fixture: Debian's OpenSSH server on 127.0.0.1 at a free port, with a host key, a user
// key, an authorized_keys file and a config that exist only in a temp dir of this run. Root may
// log in with that key only (no passwords), and only on this instance; the machine's own sshd
// and root's ~/.ssh are never read or written. A missing sshd fails the test: bootstrap installs it.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { SshHost } from '../src/drivers/ssh-hosts.ts'

/** Where Debian's openssh-server puts sshd. */
const SSHD = '/usr/sbin/sshd'

/** A running test sshd. */
export interface TestSshd extends AsyncDisposable {
  /** Its port on 127.0.0.1. */
  port: number
  /** The temp dir holding its keys and config. */
  dir: string
  /** The listening sshd's pid (each connection is a child of it). */
  pid: number
  /** A host entry for the ssh driver: root with the test key, checked against a known_hosts that lists this server. */
  host(overrides?: Partial<SshHost>): SshHost
  /** A known_hosts file that lists a different key for this server. */
  wrongKnownHosts: string
  /** What sshd has logged so far (for failure messages). */
  log(): string
}

/** A free TCP port on 127.0.0.1. */
async function freePort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  await new Promise((resolve) => server.close(resolve))
  if (typeof address !== 'object' || address === null) throw new Error('no port')
  return address.port
}

function keygen(file: string): string {
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'conch-test', '-f', file])
  return readFileSync(`${file}.pub`, 'utf8').trim()
}

/** Options of a test sshd. */
export interface SshdOptions {
  /** Variables sshd sets in every session (`SetEnv`), such as a PATH. */
  env?: Record<string, string>
}

/** Starts a test sshd; disposing it stops it and removes its dir. */
export async function startSshd(options: SshdOptions = {}): Promise<TestSshd> {
  if (!existsSync(SSHD)) {
    throw new Error(`${SSHD} is missing: run node scripts/bootstrap.mjs (it installs openssh-server)`)
  }
  const dir = mkdtempSync(join(tmpdir(), 'conch-sshd-'))
  const hostPub = keygen(join(dir, 'host_key'))
  const userPub = keygen(join(dir, 'user_key'))
  const otherPub = keygen(join(dir, 'other_host_key'))
  writeFileSync(join(dir, 'authorized_keys'), `${userPub}\n`, { mode: 0o600 })
  const port = await freePort()
  const entry = (pub: string): string => `[127.0.0.1]:${port} ${pub.split(' ').slice(0, 2).join(' ')}\n`
  writeFileSync(join(dir, 'known_hosts'), entry(hostPub))
  writeFileSync(join(dir, 'wrong_known_hosts'), entry(otherPub))
  writeFileSync(
    join(dir, 'sshd_config'),
    [
      `Port ${port}`,
      'ListenAddress 127.0.0.1',
      `HostKey ${join(dir, 'host_key')}`,
      `PidFile ${join(dir, 'sshd.pid')}`,
      `AuthorizedKeysFile ${join(dir, 'authorized_keys')}`,
      'AllowUsers root',
      'PermitRootLogin prohibit-password',
      'PubkeyAuthentication yes',
      'PasswordAuthentication no',
      'KbdInteractiveAuthentication no',
      'UsePAM no',
      'StrictModes no',
      'AllowStreamLocalForwarding yes',
      // OpenSSH lets a session open a unix socket only when local TCP forwarding is allowed too.
      'AllowTcpForwarding local',
      'X11Forwarding no',
      'PermitTTY no',
      'Subsystem sftp internal-sftp',
      ...Object.entries(options.env ?? {}).map(([name, value]) => `SetEnv ${name}=${value}`),
      '',
    ].join('\n'),
  )
  // sshd's privilege separation needs this empty dir; Debian makes it only when its own service starts.
  mkdirSync('/run/sshd', { recursive: true, mode: 0o755 })
  const child: ChildProcess = spawn(SSHD, ['-D', '-e', '-f', join(dir, 'sshd_config')], {
    stdio: ['ignore', 'ignore', 'pipe'],
  })
  let log = ''
  child.stderr?.on('data', (chunk: Buffer) => {
    log += chunk.toString()
  })
  await new Promise<void>((resolve, reject) => {
    const onExit = (code: number | null): void => reject(new Error(`sshd exited (${code}): ${log}`))
    child.once('exit', onExit)
    const poll = (): void => {
      if (log.includes('Server listening')) {
        child.off('exit', onExit)
        resolve()
      } else setTimeout(poll, 20)
    }
    poll()
  })
  return {
    port,
    dir,
    pid: child.pid ?? 0,
    wrongKnownHosts: join(dir, 'wrong_known_hosts'),
    log: () => log,
    host: (overrides = {}) => ({
      address: '127.0.0.1',
      port,
      user: 'root',
      privateKeyFile: join(dir, 'user_key'),
      knownHostsFile: join(dir, 'known_hosts'),
      dir: join(dir, 'remote'),
      ...overrides,
    }),
    async [Symbol.asyncDispose]() {
      child.kill('SIGTERM')
      await new Promise((resolve) => (child.exitCode === null ? child.once('exit', resolve) : resolve(null)))
      rmSync(dir, { recursive: true, force: true })
    },
  }
}
