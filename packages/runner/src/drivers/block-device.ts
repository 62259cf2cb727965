// The block device a path lives on, as the `major:minor` pair cgroup v2's io.max names it.
import { statSync } from 'node:fs'

/** `major:minor` of the device holding `path` (Linux's dev_t encoding), for io.max. */
export function blockDeviceOf(path: string): string {
  const dev = statSync(path, { bigint: true }).dev
  const major = ((dev >> 8n) & 0xfffn) | ((dev >> 32n) & ~0xfffn)
  const minor = (dev & 0xffn) | ((dev >> 12n) & ~0xffn)
  return `${major}:${minor}`
}
