/** Ends an exhaustive switch over a union: adding a member without handling it fails typecheck. */
export function assertNever(value: never): never {
  throw new Error(`unhandled variant: ${JSON.stringify(value)}`)
}
