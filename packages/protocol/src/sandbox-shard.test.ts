import { describe, expect, it } from 'vitest'
import { SandboxId } from './primitives.ts'
import { MAX_SHARD_NAME_LENGTH, ShardName, shardedSandboxId, shardOfSandboxId } from './sandbox-shard.ts'

const RANDOM = 'aZ09bYc8dXe7fW6g'

describe('sandbox ids that name their shard', () => {
  it('round-trips every shard name shape through a valid sandbox id', () => {
    for (const shard of ['a', 'conch-0', 'conch-runner-12', 'x'.repeat(MAX_SHARD_NAME_LENGTH), '0-9-z']) {
      const id = shardedSandboxId(shard, RANDOM)
      expect(SandboxId.safeParse(id).success, id).toBe(true)
      expect(shardOfSandboxId(id)).toBe(shard)
    }
  })

  it('refuses shard names that are not short DNS labels', () => {
    for (const bad of ['', '-a', 'a-', 'A', 'a_b', 'a.b', '../x', 'x'.repeat(MAX_SHARD_NAME_LENGTH + 1)]) {
      expect(ShardName.safeParse(bad).success, bad).toBe(false)
    }
  })

  it('reads no shard from ids that do not carry a valid one', () => {
    for (const id of [
      'sb_abc',
      'sb_Zabcdefgh',
      'sb_aXZabcdefgh',
      'sb_XaZabcdefgh',
      'x_conch0Zabcdefgh',
      'sb_conch0Zabc',
      'sb_con/ch0Zabcdefghij',
      'sb_../Zabcdefghij',
    ]) {
      expect(shardOfSandboxId(id), id).toBeNull()
    }
  })
})
