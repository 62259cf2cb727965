// Writes the script that puts a captured shell state back into a fresh shell.
//
// Model: the state came from code in a sandbox, so it is data: every name is checked again,
// every variable must be one `declare` of its own name as bash prints it, and everything else
// is written into the script through `shellQuote`. The script runs as one internal run in
// the restored sandbox's own shell (never elsewhere), with aliases off while it runs. Order
// matters: directories first (`cd` moves OLDPWD), then variables, functions and aliases,
// then the umask, traps and options, with `errexit` and `nounset` last so no step of the
// script itself trips them. Each step that bash refuses prints a line naming it on stdout,
// which the caller reads as the list of problems; the framing's helpers are read-only and
// named with a tag the snapshot never saw, so restored state cannot replace them.
import type { ShellState } from '@conch/protocol'
import { shellQuote } from './framing-lines.ts'
import {
  FRAMING_SET_OPTIONS,
  isShellOwnedVariable,
  isUserSetOption,
  isUserShoptOption,
  READONLY_SHOPT_OPTIONS,
} from './shell-state-capture.ts'

const VARIABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/
/** A `declare` bash printed: flags, then the name, then nothing or `=` and a quoted value. */
const DECLARATION = /^declare -([-aAilnrtux]+) ([A-Za-z_][A-Za-z0-9_]*)(=[\s\S]*)?$/
/** Function names bash accepts that are safe to write unquoted in `name () { ... }`. */
const FUNCTION_NAME = /^[A-Za-z_][A-Za-z0-9_.:+@%^-]*$/
/** Alias names bash accepts (no blanks, quotes, `=`, `/`, `$` or backquote). */
const ALIAS_NAME = /^[^\s=/$`'"\\]+$/

/** Maps paths in the state between the captured sandbox's view and the restored one's. */
export type PathMap = (path: string) => string

/**
 * The restore script for `state`, run in a shell created with the state's id; `mapPath`
 * turns a captured `/workspace/...` path into this sandbox's path. Problems are reported as
 * lines `problem: ...` on the run's stdout.
 */
export function restoreScript(
  state: ShellState,
  freshVariables: readonly string[],
  mapPath: PathMap,
): string {
  const lines: string[] = ['\\builtin shopt -u expand_aliases']
  const problem = (what: string): string => `|| \\builtin printf 'problem: %s\\n' ${shellQuote(what)}`

  // Directories: the stack bottom-up with `pushd -n`, then the cwd.
  for (const dir of [...state.dirStack].reverse()) {
    lines.push(
      `\\builtin pushd -n -- ${shellQuote(mapPath(dir))} >/dev/null 2>&1 ${problem(`directory stack entry ${dir}`)}`,
    )
  }
  lines.push(`\\builtin cd -- ${shellQuote(mapPath(state.cwd))} 2>/dev/null ${problem(`cwd ${state.cwd}`)}`)

  // Variables: the fresh shell's own first, so only the captured ones remain.
  const captured = new Set(state.variables.map((v) => v.name))
  const stale = freshVariables.filter(
    (n) => VARIABLE_NAME.test(n) && !isShellOwnedVariable(n) && !captured.has(n),
  )
  if (stale.length > 0) lines.push(`\\builtin unset -v ${stale.join(' ')} 2>/dev/null`)
  for (const v of state.variables) {
    const match = DECLARATION.exec(v.declaration)
    if (!VARIABLE_NAME.test(v.name) || isShellOwnedVariable(v.name) || match?.[2] !== v.name) {
      lines.push(`\\builtin printf 'problem: %s\\n' ${shellQuote(`variable ${v.name} was not restored`)}`)
      continue
    }
    // `declare -g` keeps it global even if this script were ever sourced from a function.
    // A compound value `(...)` is an assignment only when `declare` is the command word, so
    // it is not written `\\builtin declare`: the fresh shell has no user functions yet.
    const flags = match[1]!.replace(/-/g, '')
    const rest = match[3] ?? ''
    lines.push(`declare -g${flags} ${v.name}${rest} 2>/dev/null ${problem(`variable ${v.name}`)}`)
  }
  if (state.oldPwd !== null) lines.push(`\\builtin declare -gx OLDPWD=${shellQuote(mapPath(state.oldPwd))}`)
  else lines.push('\\builtin unset -v OLDPWD')

  for (const f of state.functions) {
    if (!FUNCTION_NAME.test(f.name) || f.name.startsWith('__conch_')) {
      lines.push(`\\builtin printf 'problem: %s\\n' ${shellQuote(`function ${f.name} was not restored`)}`)
      continue
    }
    // The definition is bash's own `declare -pf` text; eval keeps a body of any shape intact.
    lines.push(`\\builtin eval ${shellQuote(f.definition)} 2>/dev/null ${problem(`function ${f.name}`)}`)
  }

  for (const [name, value] of state.aliases) {
    if (!ALIAS_NAME.test(name)) continue
    lines.push(`\\builtin alias -- ${shellQuote(`${name}=${value}`)} 2>/dev/null ${problem(`alias ${name}`)}`)
  }

  if (/^[0-7]{3,4}$/.test(state.umask)) lines.push(`\\builtin umask ${state.umask}`)
  if (state.traps.length > 0) {
    lines.push(`\\builtin eval ${shellQuote(state.traps)} 2>/dev/null ${problem('traps')}`)
  }

  const expandAliases = state.shoptOptions.includes('expand_aliases')
  const shopts = state.shoptOptions.filter(
    (o) => isUserShoptOption(o) && /^[a-z_0-9]+$/.test(o) && o !== 'expand_aliases',
  )
  const on = state.setOptions.filter((o) => isUserSetOption(o) && /^[a-z-]+$/.test(o))
  // Everything the user may change goes off first (the options this bash has on), then the
  // snapshot's come on: the fresh shell's defaults never leak into the restored state.
  const v = '__conch_snap_o'
  lines.push(
    `while IFS=$' \\t' \\builtin read -r ${v} _; do case $${v} in ${[...READONLY_SHOPT_OPTIONS, 'expand_aliases'].join('|')}) ;; *) \\builtin shopt -u "$${v}" ;; esac; done < <(\\builtin shopt -s)`,
    `while IFS=' ' \\builtin read -r _ ${v}_s ${v}; do [[ $${v}_s == -o ]] && case $${v} in ${FRAMING_SET_OPTIONS.join('|')}) ;; *) \\builtin set +o "$${v}" ;; esac; done < <(\\builtin set +o)`,
    `\\builtin unset -v ${v} ${v}_s`,
  )
  if (shopts.length > 0)
    lines.push(`\\builtin shopt -s ${shopts.join(' ')} 2>/dev/null ${problem('shopt options')}`)
  const late = new Set(['errexit', 'nounset'])
  const early = on.filter((o) => !late.has(o))
  if (early.length > 0) lines.push(`\\builtin set ${early.map((o) => `-o ${o}`).join(' ')} 2>/dev/null`)
  if (expandAliases) lines.push('\\builtin shopt -s expand_aliases')
  const last = on.filter((o) => late.has(o))
  if (last.length > 0) lines.push(`\\builtin set ${last.map((o) => `-o ${o}`).join(' ')}`)
  lines.push('')
  return lines.join('\n')
}
