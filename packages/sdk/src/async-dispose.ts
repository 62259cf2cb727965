// `Symbol.asyncDispose`, or on runtimes that predate it (Node 20) the registered symbol that
// transpilers' `await using` helpers (esbuild, tsx, Babel) look up instead.

/** The key of the async dispose method. */
export const asyncDispose: typeof Symbol.asyncDispose =
  Symbol.asyncDispose ?? (Symbol.for('Symbol.asyncDispose') as typeof Symbol.asyncDispose)
