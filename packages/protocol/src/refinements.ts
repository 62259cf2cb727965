// The protocol's refinements: the checks a schema makes that JSON Schema cannot express. Each
// has a name, a test and a message. The zod schemas refine with these very functions, and the
// schema generator writes a refinement's name (`x-refine`) into the JSON Schema it makes, which
// the zod-free checker (`json-shape.ts`) looks up here: one definition serves both. The
// generator refuses a refinement that is not in this table. This module imports nothing, so
// a zod-free process (the agent) can hold it.

/** One refinement: `test` runs on a value that already passed its schema's other checks. */
export interface Refinement<T> {
  /** True when the value is acceptable. */
  readonly test: (value: T) => boolean
  /** What is wrong when `test` is false (the message). */
  readonly message: string
}

/** An object whose fields `a` and `b` are optional. */
type Either = { readonly [key: string]: unknown }

/** Every refinement the protocol's schemas use, by the name the generated schemas carry. */
export const REFINEMENTS = {
  /** An environment variable's value: bash cannot hold a NUL. */
  envValueWithoutNul: {
    test: (value: string) => !value.includes('\0'),
    message: 'values may not contain NUL',
  } satisfies Refinement<string>,
  /** A sandbox path: the kernel ends a path at NUL. */
  pathWithoutNul: {
    test: (value: string) => !value.includes('\0'),
    message: 'paths may not contain NUL',
  } satisfies Refinement<string>,
  /** The agent's arguments name exactly one way to listen. */
  oneListener: {
    test: (args: Either) => (args.listenFd === undefined) !== (args.socket === undefined),
    message: 'give exactly one of --listenFd and --socket',
  } satisfies Refinement<Either>,
  /** The agent's arguments name exactly one source of the link secret. */
  oneSecretSource: {
    test: (args: Either) => (args.secretFd === undefined) !== (args.secretFile === undefined),
    message: 'give exactly one of --secretFd and --secretFile',
  } satisfies Refinement<Either>,
} as const

/** A refinement's name. */
export type RefinementName = keyof typeof REFINEMENTS

/** The name under which `test` is registered in `REFINEMENTS`, if it is. */
export function refinementNameOf(test: unknown): RefinementName | undefined {
  for (const [name, refinement] of Object.entries(REFINEMENTS)) {
    if (refinement.test === test) return name as RefinementName
  }
  return undefined
}
