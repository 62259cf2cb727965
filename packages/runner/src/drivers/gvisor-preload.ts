// A small shared library every dynamically linked program in a gVisor sandbox preloads (named
// by the sandbox's /etc/ld.so.preload). It does two things the gVisor release Debian ships
// (2022-12) does not:
// - `statx` drops AT_NO_AUTOMOUNT before the syscall. That gVisor answers EINVAL to the flag,
//   and coreutils passes it on every stat, so `ls -l` and `stat` fail without this; nothing
//   automounts inside a sandbox, so dropping it changes no result.
// - A process of the sandbox user (any uid but 0) starting with no address-space limit sets
//   RLIMIT_AS to the bytes in /etc/conch-process-memory. gVisor has no OOM killer of its own:
//   past the host cgroup's limit the host kills the whole sandbox, agent included. With the
//   limit, a process that asks for more memory than the sandbox may use gets ENOMEM and fails
//   alone; the shell's limit is inherited by everything it starts and cannot be raised.
// The library is compiled once per source with the host's C compiler and kept in a cache dir.
import { spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { RunnerError } from '../runner-error.ts'

/** Where the library appears inside a sandbox. */
export const GUEST_PRELOAD_PATH = '/opt/conch/preload.so'

/** The generated file, inside the sandbox, holding the sandbox user's per-process memory limit. */
export const GUEST_PROCESS_MEMORY_FILE = '/etc/conch-process-memory'

/** Folders searched for the C compiler. */
const CC_DIRS = ['/usr/bin', '/usr/local/bin', '/bin']

const SOURCE = `#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

int statx(int dirfd, const char *path, int flags, unsigned int mask, struct statx *buf) {
  return (int)syscall(SYS_statx, dirfd, path, flags & ~AT_NO_AUTOMOUNT, mask, buf);
}

__attribute__((constructor)) static void conch_limit_memory(void) {
  struct rlimit now;
  if (getuid() == 0 || getrlimit(RLIMIT_AS, &now) != 0 || now.rlim_max != RLIM_INFINITY) return;
  int fd = open("${GUEST_PROCESS_MEMORY_FILE}", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  char text[32];
  ssize_t n = read(fd, text, sizeof text - 1);
  close(fd);
  if (n <= 0) return;
  text[n] = 0;
  unsigned long long bytes = strtoull(text, 0, 10);
  if (bytes == 0) return;
  struct rlimit limit = { bytes, bytes };
  setrlimit(RLIMIT_AS, &limit);
}
`

/** The C compiler's path, or null when none is installed. */
export function findCompiler(): string | null {
  for (const dir of CC_DIRS) if (existsSync(join(dir, 'cc'))) return join(dir, 'cc')
  return null
}

/** Builds the library into `cacheDir` unless it is there; returns its host path. */
export function buildPreload(cacheDir: string): string {
  const key = createHash('sha256').update(SOURCE).digest('hex').slice(0, 16)
  const library = join(cacheDir, `gvisor-preload-${key}.so`)
  if (existsSync(library)) return library
  const cc = findCompiler()
  if (!cc)
    throw new RunnerError(
      'AGENT_UNAVAILABLE',
      'no C compiler (cc) to build the gVisor preload; apt-get install gcc',
    )
  mkdirSync(cacheDir, { recursive: true, mode: 0o755 })
  const temp = `${library}.${process.pid}`
  writeFileSync(`${temp}.c`, SOURCE)
  try {
    const result = spawnSync(cc, ['-shared', '-fPIC', '-O2', '-o', temp, `${temp}.c`], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    if (result.status !== 0) {
      throw new RunnerError(
        'AGENT_UNAVAILABLE',
        `cc could not build the gVisor preload: ${(result.stderr || result.error?.message || '').trim()}; apt-get install gcc libc6-dev`,
      )
    }
    renameSync(temp, library)
    return library
  } finally {
    rmSync(`${temp}.c`, { force: true })
    rmSync(temp, { force: true })
  }
}
