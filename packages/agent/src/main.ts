#!/usr/bin/env node
// Process entry of the guest agent: reads argv and the environment, builds the agent and
// listens on the socket path the driver gave. The agent outlives its runner: it ignores
// SIGHUP and SIGPIPE, and exits only on SIGTERM/SIGINT, after ending its shells.
import { AGENT_ENV_PREFIX, AgentArgs, argvToRecord } from '@conch/protocol'
import { buildAgent } from './build-agent.ts'
import { systemClock } from './clock.ts'
import { jsonLineLogger } from './logger.ts'
import { nodeSpawn } from './spawner.ts'
import { chooseTempRoot } from './temp-root.ts'

const logger = jsonLineLogger(
  (line) => process.stderr.write(line),
  process.env.CONCH_AGENT_LOG_LEVEL === 'debug' ? 'debug' : 'info',
)

const parsed = AgentArgs.safeParse(argvToRecord(process.argv.slice(2)))
if (!parsed.success) {
  logger.error(
    { issues: parsed.error.issues },
    'usage: conch-agent --socket <path> --root <dir> [--scrollbackBytes n] [--maxSessions n] [--maxProcesses n]',
  )
  process.exit(2)
}
const args = parsed.data

const baseEnv: Record<string, string> = {}
for (const [name, value] of Object.entries(process.env)) {
  if (value !== undefined && !name.startsWith(AGENT_ENV_PREFIX)) baseEnv[name] = value
}

const { server } = buildAgent({
  root: args.root,
  baseEnv,
  spawn: nodeSpawn,
  clock: systemClock,
  logger,
  tempRoot: chooseTempRoot(),
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

await server.listen(args.socket)
logger.info({ socket: args.socket, root: args.root, pid: process.pid }, 'agent listening')
