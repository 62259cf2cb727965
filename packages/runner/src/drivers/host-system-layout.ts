// Which parts of the host's filesystem a sandbox built from the host's /usr sees, read-only:
// the top-level system entries and the subset of /etc that programs need. Secrets (shadow,
// ssh keys, the runner's config) are not among them.

/** Top-level system entries bound read-only (or re-created as the same symlink). */
export const SYSTEM_ENTRIES = ['/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32']

/** Entries of the host's /etc that programs need. */
export const ETC_ENTRIES = [
  'alternatives',
  'bash.bashrc',
  'ca-certificates',
  'ca-certificates.conf',
  'crypto-policies',
  'debian_version',
  'gai.conf',
  'host.conf',
  'inputrc',
  'ld.so.cache',
  'ld.so.conf',
  'ld.so.conf.d',
  'locale.alias',
  'localtime',
  'mime.types',
  'nsswitch.conf',
  'os-release',
  'pki',
  'profile',
  'profile.d',
  'protocols',
  'services',
  'ssl',
  'terminfo',
  'timezone',
]
