// Which runner holds a sandbox, written into the sandbox's id. A runner started with a shard
// name mints ids `sb_<shard>Z<random>`: the shard is a short DNS label with each `-` written as
// `X` (ids are `[A-Za-z0-9]` only, and an encoded shard never contains `Z`), so the first `Z`
// ends it. A router reads the shard back and forwards by it; clients treat ids as opaque.
import { z } from 'zod'

/** Longest shard name: with the 16 random characters and the separator it fills a 40-character id. */
export const MAX_SHARD_NAME_LENGTH = 23

/** A runner's shard name: a DNS label (`a-z`, `0-9`, inner `-`) of at most 23 characters. */
export const ShardName = z
  .string()
  .max(MAX_SHARD_NAME_LENGTH, `a shard name has at most ${MAX_SHARD_NAME_LENGTH} characters`)
  .regex(
    /^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/,
    'a shard name is a DNS label: lowercase letters, digits and inner hyphens (like conch-0)',
  )
/** A shard name. */
export type ShardName = z.infer<typeof ShardName>

/** Separates the encoded shard from the random part. */
const SEPARATOR = 'Z'

/** The id of a sandbox on `shard`, from `random` (`[A-Za-z0-9]`, 8 to 16 characters). */
export function shardedSandboxId(shard: ShardName, random: string): string {
  return `sb_${shard.replaceAll('-', 'X')}${SEPARATOR}${random}`
}

/**
 * The shard a sandbox id names, or null when it names none (an id from a runner without a
 * shard, or no id at all). Only a valid shard name comes back.
 */
export function shardOfSandboxId(id: string): ShardName | null {
  const match = /^sb_([a-z0-9X]{1,23})Z[A-Za-z0-9]{8,}$/.exec(id)
  if (!match) return null
  const shard = match[1]!.replaceAll('X', '-')
  return ShardName.safeParse(shard).success ? shard : null
}
