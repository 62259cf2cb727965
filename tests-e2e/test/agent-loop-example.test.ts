import { join } from 'node:path'
import { describe, expect } from 'vitest'
import { spawnNode } from '../harness/node-child.ts'
import { REPO_ROOT } from '../harness/runner-process.ts'
import { test } from './runner-fixture.ts'

const EXAMPLE = join(REPO_ROOT, 'packages/sdk/examples/agent-loop.ts')

describe('agent-loop example', () => {
  test('runs to completion against the runner', async ({ runner }) => {
    await using child = spawnNode(EXAMPLE, [], { CONCH_URL: runner.url, CONCH_API_KEY: runner.apiKey })
    const exit = await child.exited
    expect(exit, child.output()).toEqual({ code: 0, signal: null })
    expect(child.output().length).toBeGreaterThan(0)
  }, 120_000)
})
