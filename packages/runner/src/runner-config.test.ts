import { describe, expect, it } from 'vitest'
import { ConfigError, DEFAULT_PORT, parseRunnerConfig } from './runner-config.ts'

describe('parseRunnerConfig', () => {
  it('applies defaults and resolves the state dir against the cwd', () => {
    const config = parseRunnerConfig([], {}, '/srv/app')
    expect(config).toMatchObject({ host: '127.0.0.1', port: DEFAULT_PORT, stateDir: '/srv/app/.conch' })
    expect(config.limits.maxSandboxes).toBe(32)
  })

  it('lets flags override CONCH_ variables', () => {
    const config = parseRunnerConfig(
      ['--port', '0', '--state-dir=/var/conch', '--max-sandboxes', '3'],
      { CONCH_PORT: '9000', CONCH_HOST: '0.0.0.0', CONCH_MAX_SESSIONS_PER_SANDBOX: '5' },
      '/x',
    )
    expect(config).toMatchObject({ host: '0.0.0.0', port: 0, stateDir: '/var/conch' })
    expect(config.limits).toMatchObject({ maxSandboxes: 3, maxSessionsPerSandbox: 5 })
  })

  it('names the flag and value in the error for a bad port', () => {
    expect(() => parseRunnerConfig(['--port', 'eighty'], {}, '/x')).toThrow(/--port eighty/)
    expect(() => parseRunnerConfig([], { CONCH_PORT: '70000' }, '/x')).toThrow(ConfigError)
  })

  it('takes a shard name from --shard or CONCH_SHARD and refuses one that is not a short DNS label', () => {
    expect(parseRunnerConfig([], {}, '/x').shard).toBeUndefined()
    expect(parseRunnerConfig(['--shard', 'conch-2'], {}, '/x').shard).toBe('conch-2')
    expect(parseRunnerConfig([], { CONCH_SHARD: 'conch-runner-0' }, '/x').shard).toBe('conch-runner-0')
    for (const bad of ['Conch', '../x', 'a_b', '-a', 'x'.repeat(24)]) {
      expect(() => parseRunnerConfig(['--shard', bad], {}, '/x')).toThrow(/--shard .*DNS label|at most 23/)
    }
  })

  it('rejects unknown flags and unknown drivers', () => {
    expect(() => parseRunnerConfig(['--nope', '1'], {}, '/x')).toThrow(/unknown flag --nope/)
    expect(() => parseRunnerConfig(['--driver', 'vm'], {}, '/x')).toThrow(/--driver vm/)
  })

  it('never repeats the API key in an error', () => {
    expect(() => parseRunnerConfig([], { CONCH_API_KEY: 'short' }, '/x')).toThrow(/CONCH_API_KEY=…/)
  })

  it('reads --drivers as a list and --unsafe-local as a switch, from flags or variables', () => {
    const flags = parseRunnerConfig(
      ['--drivers', 'namespace, local', '--unsafe-local', '--port', '0'],
      {},
      '/x',
    )
    expect(flags).toMatchObject({ drivers: ['namespace', 'local'], unsafeLocal: true, port: 0 })
    const env = parseRunnerConfig([], { CONCH_DRIVERS: 'local', CONCH_UNSAFE_LOCAL: '1' }, '/x')
    expect(env).toMatchObject({ drivers: ['local'], unsafeLocal: true })
    const defaults = parseRunnerConfig([], {}, '/x')
    expect(defaults.drivers).toBeUndefined()
    expect(defaults.unsafeLocal).toBe(false)
    expect(parseRunnerConfig(['--unsafe-local=false'], {}, '/x').unsafeLocal).toBe(false)
  })

  it('rejects unknown drivers in --drivers and bad switch values', () => {
    expect(() => parseRunnerConfig(['--drivers', 'namespace,vm'], {}, '/x')).toThrow(/--drivers namespace,vm/)
    expect(() => parseRunnerConfig(['--drivers', ','], {}, '/x')).toThrow(/at least one/)
    expect(() => parseRunnerConfig([], { CONCH_UNSAFE_LOCAL: 'yes' }, '/x')).toThrow(/CONCH_UNSAFE_LOCAL=yes/)
  })

  it('takes --log-format auto, pretty or json, auto by default', () => {
    expect(parseRunnerConfig([], {}, '/x').logFormat).toBe('auto')
    expect(parseRunnerConfig(['--log-format', 'json'], {}, '/x').logFormat).toBe('json')
    expect(parseRunnerConfig([], { CONCH_LOG_FORMAT: 'pretty' }, '/x').logFormat).toBe('pretty')
    expect(() => parseRunnerConfig(['--log-format=xml'], {}, '/x')).toThrow(
      /--log-format xml is not valid: use one of auto, pretty, json/,
    )
  })

  it('reports every bad setting in one line that says what each accepts', () => {
    let message = ''
    try {
      parseRunnerConfig(['--port', 'abc', '--max-sandboxes', '0'], { CONCH_SHARD: 'Bad_Shard' }, '/x')
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError)
      message = (error as Error).message
    }
    expect(message).not.toContain('\n')
    expect(message).toContain('--port abc is not valid: use an integer from 0 to 65535')
    expect(message).toContain('--max-sandboxes 0 is not valid: use a positive integer')
    expect(message).toContain('CONCH_SHARD=Bad_Shard is not valid: use a DNS label')
    expect(message).not.toMatch(/Invalid input|expected number/)
  })
})
