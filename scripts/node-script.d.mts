/** The arguments after `node` in a package.json script, or `null` when it needs a shell. */
export declare function nodeScriptArgs(script: unknown): string[] | null
