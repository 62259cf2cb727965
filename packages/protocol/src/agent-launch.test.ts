import { describe, expect, it } from 'vitest'
import { AgentArgs } from './agent-args.ts'
import { AGENT_NODE_FLAGS, agentCommand, argvToRecord, compileCacheFlag } from './agent-launch.ts'

describe('agentCommand', () => {
  it('puts the node flags before the entry and the arguments after it', () => {
    const argv = agentCommand('/opt/conch/node', '/opt/conch/conch-agent.mjs', {
      listenFd: 4,
      secretFd: 5,
      root: '/workspace',
    })
    expect(argv).toEqual([
      '/opt/conch/node',
      ...AGENT_NODE_FLAGS,
      '/opt/conch/conch-agent.mjs',
      '--listenFd',
      '4',
      '--secretFd',
      '5',
      '--root',
      '/workspace',
    ])
  })

  it('writes arguments that the agent parses back to the same values, leaving out unset ones', () => {
    const args: AgentArgs = {
      socket: '/run/conch/agent.sock',
      secretFile: '/run/conch/secret',
      root: '/workspace',
      sandboxUid: 1000,
      sandboxGid: 1000,
      scrollbackBytes: 8 * 1024 * 1024,
      maxSessions: 32,
      workCgroup: undefined,
      oomEvents: '/run/conch-oom-events',
    }
    const argv = agentCommand('node', 'agent.mjs', args)
    expect(argv).not.toContain('--workCgroup')
    const parsed = AgentArgs.parse(argvToRecord(argv.slice(AGENT_NODE_FLAGS.length + 2)))
    expect(parsed).toEqual(args)
  })
})

describe('compileCacheFlag', () => {
  it('puts the compile cache preload between the node flags and the entry, with the dir as a JS string', () => {
    const dir = '/opt/conch/compile-cache "x"'
    const argv = agentCommand('/n', '/e.mjs', { socket: '/s', secretFd: 4, root: '/w' }, dir)
    expect(argv.slice(0, AGENT_NODE_FLAGS.length + 3)).toEqual([
      '/n',
      ...AGENT_NODE_FLAGS,
      compileCacheFlag(dir),
      '/e.mjs',
    ])
    const code = decodeURIComponent(compileCacheFlag(dir).replace('--import=data:text/javascript,', ''))
    expect(code).toContain(`directory:${JSON.stringify(dir)},portable:true`)
    expect(agentCommand('/n', '/e.mjs', { socket: '/s', secretFd: 4, root: '/w' })).not.toContain(
      compileCacheFlag(dir),
    )
  })
})
