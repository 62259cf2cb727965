import { Sandbox } from '@conch/sdk'
import { describe, expect } from 'vitest'
import { connectionOf, test } from './runner-fixture.ts'

const SETUP = [
  'cd /usr',
  'export E2E_EXPORTED="exported value"',
  'E2E_PLAIN=plain',
  'greet() { echo "hello, $1"; }',
  "alias e2e_alias='echo aliased'",
]

const CHECK = 'pwd; echo "$E2E_EXPORTED"; echo "$E2E_PLAIN"; greet world; e2e_alias'
const EXPECTED = '/usr\nexported value\nplain\nhello, world\naliased\n'

describe('shell state', () => {
  test('keeps cwd, variables, functions and aliases across runs', async ({ sandbox }) => {
    await using sh = await sandbox.shell()
    for (const command of SETUP) {
      const result = await sh.run(command)
      expect(result.exitCode, command).toBe(0)
    }
    const result = await sh.run(CHECK)
    expect(result.stdout).toBe(EXPECTED)
    expect(result.stderr).toBe('')
    expect(result.exitCode).toBe(0)
  })

  test('keeps the state for a second client that reattaches by session id', async ({ runner, sandbox }) => {
    await using sh = await sandbox.shell()
    for (const command of SETUP) await sh.run(command)

    const other = await Sandbox.connect(sandbox.id, connectionOf(runner))
    await using again = await other.reattachShell(sh.sessionId)
    expect(again.sessionId).toBe(sh.sessionId)
    const result = await again.run(CHECK)
    expect(result.stdout).toBe(EXPECTED)

    // The state the second client sets is visible to the first one too: it is one bash.
    await again.run('cd / && export E2E_FROM_SECOND=yes')
    const back = await sh.run('pwd; echo "$E2E_FROM_SECOND"')
    expect(back.stdout).toBe('/\nyes\n')
  })

  test('sets variables and aliases through the session API', async ({ sandbox }) => {
    await using sh = await sandbox.shell()
    await sh.env.set('E2E_API_VAR', 'from the api')
    await sh.aliases.add('e2e_ll', 'echo listed')
    const result = await sh.run('echo "$E2E_API_VAR"; e2e_ll; bash -c \'echo "child sees $E2E_API_VAR"\'')
    expect(result.stdout).toBe('from the api\nlisted\nchild sees from the api\n')
  })
})
