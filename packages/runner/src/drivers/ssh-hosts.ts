// The SSH hosts an operator lets sandboxes run on: a JSON file named by `--ssh-hosts`
// (CONCH_SSH_HOSTS). A create request picks a host by its name here and never gives an
// address, a user or a key itself. The file holds paths to keys, never key material, so the
// runner's state and API hold only host names.
import { readFileSync } from 'node:fs'
import { homedir } from 'node:os'
import { isAbsolute, join } from 'node:path'
import { z } from 'zod'
import { ConfigError } from '../config-error.ts'

/** A host name as requests give it: a short label. */
export const SshHostName = z
  .string()
  .regex(/^[a-z0-9][a-z0-9_-]{0,62}$/, 'a host name is lowercase letters, digits, _ and -, at most 63')

const AbsolutePath = z.string().refine(isAbsolute, 'an absolute path')

/** One configured host. */
export const SshHost = z
  .object({
    /** Address to connect to (name or IP). */
    address: z.string().min(1),
    /** SSH port. */
    port: z.number().int().min(1).max(65_535).default(22),
    /** Remote user the agent runs as. */
    user: z.string().min(1),
    /** Private key file (OpenSSH or PEM) the runner authenticates with. */
    privateKeyFile: AbsolutePath.optional(),
    /** Authenticate through the runner's ssh-agent (SSH_AUTH_SOCK) instead of a key file. */
    agent: z.boolean().optional(),
    /** known_hosts file the host's key must be in; default: the runner user's ~/.ssh/known_hosts. */
    knownHostsFile: AbsolutePath.optional(),
    /** Remote folder holding the sandboxes' folders; default: ~/.conch on the remote. */
    dir: AbsolutePath.optional(),
    /** Remote Node (>= 22) that runs the agent; default: `node` on the remote's PATH, else the runner's own uploaded. */
    nodePath: AbsolutePath.optional(),
  })
  .strict()
  .refine((h) => (h.privateKeyFile === undefined) !== (h.agent !== true), {
    message: 'give exactly one of privateKeyFile and "agent": true',
  })
/** One configured host. */
export type SshHost = z.infer<typeof SshHost>

/** The hosts file: `{ "hosts": { "<name>": { ... } } }`. */
export const SshHostsFile = z.object({ hosts: z.record(SshHostName, SshHost) }).strict()

/** Configured hosts by name. */
export type SshHosts = ReadonlyMap<string, SshHost>

/** The known_hosts file a host is checked against. */
export function knownHostsFileOf(host: SshHost): string {
  return host.knownHostsFile ?? join(homedir(), '.ssh', 'known_hosts')
}

/** Reads and checks the hosts file; ConfigError with one line naming what is wrong. */
export function loadSshHosts(file: string): SshHosts {
  let raw: unknown
  try {
    raw = JSON.parse(readFileSync(file, 'utf8'))
  } catch (error) {
    throw new ConfigError(`--ssh-hosts ${file}: cannot read it as JSON (${(error as Error).message})`)
  }
  const parsed = SshHostsFile.safeParse(raw)
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.') || '(file)'}: ${i.message}`)
    throw new ConfigError(
      `--ssh-hosts ${file}: ${problems.join('; ')}; see the "Run sessions on your own machine over SSH" guide`,
    )
  }
  return new Map(Object.entries(parsed.data.hosts))
}
