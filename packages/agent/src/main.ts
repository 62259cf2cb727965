#!/usr/bin/env node
// Process entry of the guest agent: reads argv and the environment, reads the link secret from
// the fd the driver gave, builds the agent and serves the listening socket the driver handed
// over (or a path, in tests). The agent outlives its runner: it ignores SIGHUP and SIGPIPE,
// and exits only on SIGTERM/SIGINT, after ending its shells.
import { closeSync, readFileSync, rmSync } from 'node:fs'
import { watchIdleMemory } from '@conch/protocol/idle-memory-release'
import { AGENT_ENV_PREFIX, argvToRecord, parseAgentArgs } from '@conch/protocol/zod-free'
import { buildAgent } from './build-agent.ts'
import { systemClock } from './clock.ts'
import { jsonLineLogger } from './logger.ts'
import { oomCheck } from './oom-check.ts'
import { nodeSpawn, sandboxSpawn } from './spawner.ts'
import { chooseTempRoot } from './temp-root.ts'

/** When the agent's own code began, after Node's bootstrap and the bundle's load (ms since process start). */
const mainStartMs = performance.now()

const logger = jsonLineLogger(
  (line) => process.stderr.write(line),
  process.env.CONCH_AGENT_LOG_LEVEL === 'debug' ? 'debug' : 'info',
)

const parsed = parseAgentArgs(argvToRecord(process.argv.slice(2)))
if (!parsed.ok) {
  logger.error(
    { problem: parsed.message },
    'usage: conch-agent (--listenFd n | --socket <path>) (--secretFd n | --secretFile <path>) --root <dir> [--scrollbackBytes n] [--maxSessions n] [--maxProcesses n] [--sandboxUid n --sandboxGid n] [--workCgroup <cgroup.procs> [--workPidsCgroup <cgroup.procs>]] [--oomEvents <memory events file>]',
  )
  process.exit(2)
}
const args = parsed.value

/** Reads the link secret once: from the fd (then closed) or the file (then deleted, so no later process finds it). */
function readLinkSecret(): string {
  if (args.secretFd !== undefined) {
    const text = readFileSync(args.secretFd, 'utf8')
    closeSync(args.secretFd)
    return text.trim()
  }
  const file = args.secretFile ?? ''
  const text = readFileSync(file, 'utf8')
  rmSync(file, { force: true })
  return text.trim()
}

const linkSecret = readLinkSecret()
if (!/^[0-9a-f]{64}$/.test(linkSecret)) {
  logger.error({}, 'the link secret on --secretFd or --secretFile is not 64 hex digits')
  process.exit(2)
}

const baseEnv: Record<string, string> = {}
for (const [name, value] of Object.entries(process.env)) {
  if (value !== undefined && !name.startsWith(AGENT_ENV_PREFIX)) baseEnv[name] = value
}

const sandboxUser =
  args.sandboxUid === undefined
    ? undefined
    : { uid: args.sandboxUid, gid: args.sandboxGid ?? args.sandboxUid }

const workCgroups = [args.workCgroup, args.workPidsCgroup].filter((path) => path !== undefined)

const { server, sessions } = buildAgent({
  root: args.root,
  baseEnv,
  spawn: sandboxSpawn(nodeSpawn, sandboxUser, workCgroups, logger),
  workCgroups,
  clock: systemClock,
  logger,
  tempRoot: args.tempRoot ?? chooseTempRoot(),
  linkSecret,
  ...(args.secretFile === undefined ? {} : { resumeSecretFile: args.secretFile }),
  oomCheck: oomCheck(args.oomEvents),
  ...(sandboxUser === undefined ? {} : { sandboxUser }),
  ...(args.scrollbackBytes === undefined ? {} : { scrollbackBytes: args.scrollbackBytes }),
  ...(args.maxSessions === undefined ? {} : { maxSessions: args.maxSessions }),
  ...(args.maxProcesses === undefined ? {} : { maxProcesses: args.maxProcesses }),
})

process.on('SIGHUP', () => {})
process.on('SIGPIPE', () => {})
let stopping = false
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, () => {
    if (stopping) return
    stopping = true
    logger.info({ signal }, 'agent stopping')
    void server.close().finally(() => process.exit(0))
  })
}
process.on('uncaughtException', (err) =>
  logger.error({ err: err.stack ?? String(err) }, 'uncaught exception'),
)
process.on('unhandledRejection', (err) => logger.error({ err: String(err) }, 'unhandled rejection'))

await server.listen(args.listenFd === undefined ? { path: args.socket ?? '' } : { fd: args.listenFd })
// Where the start went, for the create timeline (packages/runner/bench/create-steps-bench.ts):
// wall-clock ms of the process start, and ms after it of Node's bootstrap, the agent's code and now.
logger.info(
  {
    root: args.root,
    pid: process.pid,
    start: {
      processStart: performance.timeOrigin,
      bootstrapped: performance.nodeTiming.bootstrapComplete,
      main: mainStartMs,
      listening: performance.now(),
    },
  },
  'agent listening',
)
// The sandbox's first shell is usually asked for right after its create: start it now. Its move
// into the work cgroup (spawner.ts) proceeds off this thread while the runner's handshake is served.
sessions.prepareSpare()
// An agent lives for hours; once a burst of runs is over it gives back what the burst grew. The
// watcher starts once the runner is linked, off the handshake's path.
server.whenLinked(watchIdleMemory)
