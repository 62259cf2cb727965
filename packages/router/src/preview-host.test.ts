import { shardedSandboxId } from '@conch/protocol'
import { describe, expect, it } from 'vitest'
import { ConfigError } from './config-error.ts'
import { checkPreviewShards, previewTarget } from './preview-host.ts'
import { RouterError } from './router-error.ts'
import { buildShardTable } from './shard-table.ts'

const shards = buildShardTable({ pattern: 'conch-{n}=http://conch-{n}:7878', count: 12 })
const codeOf = (fn: () => unknown): string | null => {
  try {
    fn()
    return null
  } catch (error) {
    return error instanceof RouterError ? error.code : 'not a RouterError'
  }
}

describe('previewTarget', () => {
  it('finds the shard of a lowercased id, whatever case and port the Host has', () => {
    for (const n of [0, 1, 10, 11]) {
      const id = shardedSandboxId(`conch-${n}`, 'AbCdEfGhZz123456')
      for (const host of [`3000-${id.toLowerCase()}.preview.test`, `3000-${id}.PREVIEW.test:443`]) {
        const target = previewTarget(host, '/a?b', 'preview.test', shards)
        expect([target?.shard.name, target?.host, target?.pathAndQuery], host).toEqual([
          `conch-${n}`,
          host,
          '/a?b',
        ])
      }
    }
  })

  it('leaves hosts off the domain alone and refuses malformed ones under it', () => {
    const id = shardedSandboxId('conch-1', 'abcdefgh12345678').toLowerCase()
    expect(previewTarget(`3000-${id}.preview.test.evil`, '/', 'preview.test', shards)).toBeNull()
    expect(previewTarget(`3000-${id}.evilpreview.test`, '/', 'preview.test', shards)).toBeNull()
    expect(previewTarget(`3000-${id}.preview.test`, '/', null, shards)).toBeNull()
    for (const host of [
      `65536-${id}.preview.test`,
      `03000-${id}.preview.test`,
      `a.3000-${id}.preview.test`,
    ]) {
      expect(
        codeOf(() => previewTarget(host, '/', 'preview.test', shards)),
        host,
      ).toBe('BAD_REQUEST')
    }
    expect(codeOf(() => previewTarget(`3000-${id}.preview.test`, 'http://x/', 'preview.test', shards))).toBe(
      'BAD_REQUEST',
    )
    expect(
      codeOf(() => previewTarget('3000-sb_conchx99zabcdefgh1.preview.test', '/', 'preview.test', shards)),
    ).toBe('SANDBOX_NOT_FOUND')
  })
})

describe('checkPreviewShards', () => {
  it('accepts numbered shards and refuses names a lowercased id cannot tell apart', () => {
    expect(() => checkPreviewShards(shards)).not.toThrow()
    const clash = buildShardTable({ shards: 'a=http://x:1,az=http://y:1' })
    expect(() => checkPreviewShards(clash)).toThrow(ConfigError)
  })
})
