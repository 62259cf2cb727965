// A small shared library every dynamically linked program in a gVisor sandbox preloads (named
// by the sandbox's /etc/ld.so.preload). It does what the gVisor release Debian ships
// (2022-12) does not:
// - `statx` drops AT_NO_AUTOMOUNT before the syscall. That gVisor answers EINVAL to the flag,
//   and coreutils passes it on every stat, so `ls -l` and `stat` fail without this; nothing
//   automounts inside a sandbox, so dropping it changes no result.
// - A process of the sandbox user (any uid but 0) starting with no address-space limit sets
//   RLIMIT_AS to the bytes in /etc/conch-process-memory. gVisor has no OOM killer of its own:
//   past the host cgroup's limit the host kills the whole sandbox, agent included. With the
//   limit, a process that asks for more memory than the sandbox may use gets ENOMEM and fails
//   alone; the shell's limit is inherited by everything it starts and cannot be raised.
// - Those processes' malloc family ends the process with SIGKILL, as Linux's OOM killer would,
//   when an allocation fails under that limit, after adding one to the `oom_kill N` count in
//   /run/conch-oom-events (which the agent reads to mark a run `oomKilled`, and the runner for
//   the sandbox's usage). So a hog exits 137 under gVisor as under the namespace driver. Only the
//   limit the preload set counts: a process that lowered its own (`ulimit -v`) gets NULL back.
//   The count is the sandbox's own word (its user can write the file); the runner reads only
//   its first bytes.
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

/** The counter file, inside the sandbox, of the processes the preload ended for the memory limit. */
export const GUEST_OOM_EVENTS = '/run/conch-oom-events'

/** Folders searched for the C compiler. */
const CC_DIRS = ['/usr/bin', '/usr/local/bin', '/bin']

const SOURCE = `#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

/* 1 when this process runs under the address-space limit this library set. */
static int conch_limited;

int statx(int dirfd, const char *path, int flags, unsigned int mask, struct statx *buf) {
  return (int)syscall(SYS_statx, dirfd, path, flags & ~AT_NO_AUTOMOUNT, mask, buf);
}

__attribute__((constructor)) static void conch_limit_memory(void) {
  struct rlimit now;
  if (getuid() == 0 || getrlimit(RLIMIT_AS, &now) != 0) return;
  int fd = open("${GUEST_PROCESS_MEMORY_FILE}", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  char text[32];
  ssize_t n = read(fd, text, sizeof text - 1);
  close(fd);
  if (n <= 0) return;
  text[n] = 0;
  unsigned long long bytes = strtoull(text, 0, 10);
  if (bytes == 0) return;
  if (now.rlim_max == RLIM_INFINITY) {
    struct rlimit limit = { bytes, bytes };
    if (setrlimit(RLIMIT_AS, &limit) != 0) return;
    now = limit;
  }
  conch_limited = now.rlim_cur == bytes;
}

/* Counts the kill in the sandbox's OOM file, then ends the process as the OOM killer would. */
static void conch_out_of_memory(void) {
  int fd = open("${GUEST_OOM_EVENTS}", O_RDWR | O_CLOEXEC);
  if (fd >= 0) {
    if (flock(fd, LOCK_EX) == 0) {
      char text[64];
      ssize_t n = pread(fd, text, sizeof text - 1, 0);
      text[n > 0 ? n : 0] = 0;
      char *at = strstr(text, "oom_kill ");
      unsigned long long kills = at ? strtoull(at + 9, 0, 10) : 0;
      int len = snprintf(text, sizeof text, "oom_kill %llu\\n", kills + 1);
      if (ftruncate(fd, 0) == 0 && pwrite(fd, text, (size_t)len, 0) < 0) {}
    }
    close(fd);
  }
  kill(getpid(), SIGKILL);
}

void *malloc(size_t size) {
  void *p = __libc_malloc(size);
  if (!p && conch_limited) conch_out_of_memory();
  return p;
}

void *calloc(size_t count, size_t size) {
  void *p = __libc_calloc(count, size);
  if (!p && conch_limited && errno == ENOMEM) conch_out_of_memory();
  return p;
}

void *realloc(void *old, size_t size) {
  void *p = __libc_realloc(old, size);
  if (!p && size != 0 && conch_limited) conch_out_of_memory();
  return p;
}

void *memalign(size_t alignment, size_t size) {
  void *p = __libc_memalign(alignment, size);
  if (!p && conch_limited && errno == ENOMEM) conch_out_of_memory();
  return p;
}

void *aligned_alloc(size_t alignment, size_t size) {
  return memalign(alignment, size);
}

int posix_memalign(void **out, size_t alignment, size_t size) {
  if (alignment % sizeof(void *) != 0 || (alignment & (alignment - 1)) != 0) return EINVAL;
  void *p = __libc_memalign(alignment, size);
  if (!p) {
    if (conch_limited) conch_out_of_memory();
    return ENOMEM;
  }
  *out = p;
  return 0;
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
