// The /etc files a sandbox gets generated instead of the host's: its users (root, the sandbox
// user, nobody), groups, hostname and hosts. Nothing in them names a host user or address.

/** The hostname every sandbox has. */
export const SANDBOX_HOSTNAME = 'sandbox'

/** The name of the user a sandbox's shells run as. */
export const SANDBOX_USER = 'sandbox'

/** The generated /etc files, by name, for a sandbox user `uid` whose home is `home`. */
export function sandboxEtcFiles(uid: number, home: string): Record<string, string> {
  return {
    passwd: `root:x:0:0:root:/root:/usr/sbin/nologin\n${SANDBOX_USER}:x:${uid}:${uid}:conch sandbox:${home}:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n`,
    group: `root:x:0:\n${SANDBOX_USER}:x:${uid}:\nnogroup:x:65534:\n`,
    hostname: `${SANDBOX_HOSTNAME}\n`,
    hosts: `127.0.0.1 localhost\n::1 localhost ip6-localhost\n127.0.1.1 ${SANDBOX_HOSTNAME}\n`,
  }
}
