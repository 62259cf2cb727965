import { describe, expect, it } from 'vitest'
import { ConfigError } from './config-error.ts'
import { buildShardTable } from './shard-table.ts'

describe('buildShardTable', () => {
  it('reads name=url entries and expands a StatefulSet pattern', () => {
    const listed = buildShardTable({ shards: 'a=http://10.0.0.5:7878, b=https://runner-b:443' })
    expect([...listed.keys()]).toEqual(['a', 'b'])
    expect(listed.get('b')!.url.origin).toBe('https://runner-b')
    const pattern = buildShardTable({ pattern: 'conch-{n}=http://conch-{n}.conch-headless:7878', count: 3 })
    expect([...pattern.values()].map((s) => `${s.name} ${s.url.host}`)).toEqual([
      'conch-0 conch-0.conch-headless:7878',
      'conch-1 conch-1.conch-headless:7878',
      'conch-2 conch-2.conch-headless:7878',
    ])
  })

  it('refuses names that are not shard names, URLs with paths or credentials, duplicates and an empty table', () => {
    const bad: [Parameters<typeof buildShardTable>[0], RegExp][] = [
      [{ shards: 'A=http://x:1' }, /DNS label/],
      [{ shards: 'a=ftp://x' }, /http/],
      [{ shards: 'a=http://x:1/admin' }, /bare origin/],
      [{ shards: 'a=http://user:pw@x:1' }, /bare origin/],
      [{ shards: 'a=http://x:1,a=http://y:1' }, /twice/],
      [{ shards: 'nourl' }, /name=url/],
      [{ pattern: 'conch=http://x', count: 2 }, /\{n\}/],
      [{ pattern: 'conch-{n}=http://conch-{n}:1' }, /shard-count/],
      [{}, /no shards/],
    ]
    for (const [input, message] of bad) {
      expect(() => buildShardTable(input), JSON.stringify(input)).toThrow(ConfigError)
      expect(() => buildShardTable(input), JSON.stringify(input)).toThrow(message)
    }
  })
})
