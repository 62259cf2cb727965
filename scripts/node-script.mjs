// A package.json script of the form `node <flags> <file> <args>`, read into the arguments to
// give the Node binary directly, so the bootstrap can start the runner with the script's own
// flags without a package manager and a shell in between.

/**
 * The arguments after `node` in `script`, or `null` when the script is anything but one plain
 * `node` command (quotes, variables, `&&`, pipes, redirections): such a script needs a shell.
 */
export function nodeScriptArgs(script) {
  if (typeof script !== 'string' || /["'`$\\|&;<>(){}*?~]/.test(script)) return null
  const words = script.trim().split(/\s+/)
  if (words[0] !== 'node') return null
  return words.slice(1)
}
