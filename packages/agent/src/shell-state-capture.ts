// Reads a shell's state out of bash, between runs, as data.
//
// Model: one internal run sources a script that prints NUL-separated records
// (`kind\0name\0value\0`) between a start and an end record that carry a fresh nonce, so
// output a user's DEBUG trap prints around them is ignored. bash hides a DEBUG trap from
// sourced scripts unless `functrace` is on, so such a trap is captured only then. The script turns off the DEBUG,
// ERR and RETURN traps and `errexit` while it prints (traps are recorded first and put back
// after), reads nothing through aliases (`expand_aliases` off, builtins called as
// `\builtin`), and leaves no variable of its own behind. What it prints is parsed into a
// `ShellState`, leaving out bash's own variables and the framing's helpers, which a restored
// shell gets fresh.
import type { ShellFunction, ShellVariable } from '@conch/protocol'
import { newNonce } from './framing-lines.ts'

/**
 * Variables bash sets or computes itself, or the framing owns: never captured, never restored,
 * never unset. `OLDPWD` is captured on its own, as a path.
 */
const SHELL_OWNED = new Set([
  'BASHOPTS',
  'BASHPID',
  'COLUMNS',
  'DIRSTACK',
  'EPOCHREALTIME',
  'EPOCHSECONDS',
  'EUID',
  'FUNCNAME',
  'GROUPS',
  'HISTCMD',
  'HISTFILE',
  'HOSTTYPE',
  'LINENO',
  'LINES',
  'MACHTYPE',
  'MAILCHECK',
  'OLDPWD',
  'OPTERR',
  'OSTYPE',
  'PIPESTATUS',
  'PPID',
  'PROMPT_COMMAND',
  'PS0',
  'PS1',
  'PS2',
  'PWD',
  'RANDOM',
  'SECONDS',
  'SHELLOPTS',
  'SHLVL',
  'SRANDOM',
  'TMOUT',
  'UID',
  '_',
])

/** Prefixes of names that belong to bash (`BASH_*`, completion) or to the framing. */
const OWNED_PREFIXES = ['BASH', 'COMP_', '__conch_']

/** Whether a variable belongs to bash or the framing rather than to the user. */
export function isShellOwnedVariable(name: string): boolean {
  return SHELL_OWNED.has(name) || OWNED_PREFIXES.some((p) => name.startsWith(p))
}

/** `set -o` options the framing owns (history, line editing, job control) or that cannot be set. */
export const FRAMING_SET_OPTIONS = ['emacs', 'vi', 'history', 'histexpand', 'monitor', 'privileged', 'onecmd']
/** `shopt` options that are read-only. */
export const READONLY_SHOPT_OPTIONS = ['login_shell', 'restricted_shell']
const OWNED_SET_OPTIONS = new Set(FRAMING_SET_OPTIONS)
const OWNED_SHOPT_OPTIONS = new Set(READONLY_SHOPT_OPTIONS)

/** Whether a `set -o` option is the user's to keep. */
export function isUserSetOption(name: string): boolean {
  return !OWNED_SET_OPTIONS.has(name)
}

/** Whether a `shopt` option is the user's to keep. */
export function isUserShoptOption(name: string): boolean {
  return !OWNED_SHOPT_OPTIONS.has(name)
}

/** The script an internal run sources to print the shell's state; `nonce` marks where it starts and ends. */
export function captureScript(nonce: string): string {
  const v = '__conch_snap'
  return [
    // Saved before anything changes: options, traps, aliases' switch. functrace goes off
    // before the command substitutions, or a DEBUG trap would print into them.
    `${v}_e=$-`,
    `\\builtin set +T`,
    `${v}_t=$(\\builtin trap -p)`,
    // The traps as the user set them: the framing's `trap` lists DEBUG, ERR and RETURN with the
    // user's actions where bash's own listing shows the framing's wrappers.
    `${v}_u=$(trap -p)`,
    `${v}_a=$(\\builtin shopt -p expand_aliases)`,
    `\\builtin shopt -u expand_aliases`,
    `\\builtin trap - DEBUG ERR RETURN`,
    `\\builtin set +e`,
    `\\builtin printf 'start\\0%s\\0\\0' ${nonce}`,
    `\\builtin printf 'traps\\0\\0%s\\0' "$${v}_u"`,
    `\\builtin printf 'set\\0%s\\0\\0' "$(\\builtin set +o | while IFS=' ' \\builtin read -r _ s o; do [[ $s == -o ]] && \\builtin printf '%s ' "$o"; done)"`,
    `\\builtin printf 'shopt\\0%s\\0\\0' "$(\\builtin shopt -s | while IFS=$' \\t' \\builtin read -r o _; do \\builtin printf '%s ' "$o"; done)"`,
    `\\builtin printf 'expand_aliases\\0\\0%s\\0' "$${v}_a"`,
    `\\builtin printf 'cwd\\0\\0%s\\0' "$PWD"`,
    `[[ -v OLDPWD ]] && \\builtin printf 'oldpwd\\0\\0%s\\0' "$OLDPWD"`,
    `\\builtin printf 'umask\\0\\0%s\\0' "$(\\builtin umask)"`,
    `\\builtin printf 'dir\\0\\0%s\\0' "\${DIRSTACK[@]}"`,
    `while IFS= \\builtin read -r ${v}_v; do \\builtin printf 'var\\0%s\\0' "$${v}_v"; \\builtin declare -p -- "$${v}_v" 2>/dev/null; \\builtin printf '\\0'; done < <(\\builtin compgen -v)`,
    `while IFS= \\builtin read -r ${v}_v; do \\builtin printf 'fn\\0%s\\0' "$${v}_v"; \\builtin declare -pf -- "$${v}_v" 2>/dev/null; \\builtin printf '\\0'; done < <(\\builtin compgen -A function)`,
    `for ${v}_v in "\${!BASH_ALIASES[@]}"; do \\builtin printf 'alias\\0%s\\0%s\\0' "$${v}_v" "\${BASH_ALIASES[$${v}_v]}"; done`,
    `\\builtin printf 'end\\0%s\\0\\0' ${nonce}`,
    `\\builtin eval "$${v}_a"`,
    `case $${v}_e in *e*) \\builtin set -e ;; esac`,
    `case $${v}_e in *T*) \\builtin set -T ;; esac`,
    `\\builtin unset -v ${v}_t ${v}_u ${v}_e ${v}_a ${v}_v`,
    // Last: once the DEBUG trap is back it runs before every command.
    `\\builtin eval "$${v}_t"`,
    '',
  ].join('\n')
}

/** What the capture script printed, parsed; every field is data from the sandbox. */
export interface CapturedShell {
  cwd: string
  oldPwd: string | null
  dirStack: string[]
  umask: string
  variables: ShellVariable[]
  functions: ShellFunction[]
  aliases: Array<[string, string]>
  setOptions: string[]
  shoptOptions: string[]
  expandAliases: boolean
  traps: string
}

/** A new nonce for one capture. */
export function captureNonce(): string {
  return newNonce()
}

const VARIABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/
/** `declare -<flags> name` at the start of a declaration, as bash prints it. */
const DECLARATION = /^declare -([-aAilnrtux]+) ([A-Za-z_][A-Za-z0-9_]*)(=|$)/

/**
 * Parses the records between the start and end records carrying `nonce`. Returns null when
 * either is missing (the shell did not run the script to its end).
 */
export function parseCapture(out: Buffer, nonce: string): CapturedShell | null {
  const fields = out.toString('utf8').split('\0')
  let at = -1
  for (let i = 0; i + 1 < fields.length; i++) {
    if (fields[i]!.endsWith('start') && fields[i + 1] === nonce) {
      at = i + 3
      break
    }
  }
  if (at < 0) return null
  const state: CapturedShell = {
    cwd: '',
    oldPwd: null,
    dirStack: [],
    umask: '0022',
    variables: [],
    functions: [],
    aliases: [],
    setOptions: [],
    shoptOptions: [],
    expandAliases: true,
    traps: '',
  }
  const dirs: string[] = []
  for (; at + 2 < fields.length; at += 3) {
    const kind = fields[at]!
    const name = fields[at + 1]!
    const value = fields[at + 2]!
    switch (kind) {
      case 'end':
        if (name !== nonce) return null
        state.dirStack = dirs.slice(1)
        if (state.expandAliases) state.shoptOptions.push('expand_aliases')
        return state
      case 'traps':
        state.traps = value
        break
      case 'set':
        state.setOptions = words(name).filter(isUserSetOption)
        break
      case 'shopt':
        state.shoptOptions = words(name).filter((o) => isUserShoptOption(o) && o !== 'expand_aliases')
        break
      case 'expand_aliases':
        state.expandAliases = value.trim() === 'shopt -s expand_aliases'
        break
      case 'cwd':
        state.cwd = value
        break
      case 'oldpwd':
        state.oldPwd = value
        break
      case 'umask':
        if (/^[0-7]{3,4}$/.test(value.trim())) state.umask = value.trim()
        break
      case 'dir':
        dirs.push(value)
        break
      case 'var': {
        const declaration = value.replace(/\n$/, '')
        const match = DECLARATION.exec(declaration)
        if (VARIABLE_NAME.test(name) && !isShellOwnedVariable(name) && match?.[2] === name)
          state.variables.push({ name, declaration })
        break
      }
      case 'fn':
        // The framing's own functions stay behind: its helpers, and its `trap` (which keeps the
        // user's DEBUG, ERR and RETURN actions; the restored shell has its own).
        if (!name.startsWith('__conch_') && !isFramingTrap(name, value) && value.length > 0)
          state.functions.push({ name, definition: value.replace(/\n$/, '') })
        break
      case 'alias':
        state.aliases.push([name, value])
        break
      default:
        // An unknown kind means the records lost their alignment: refuse the whole capture.
        return null
    }
  }
  return null
}

function words(text: string): string[] {
  return text.split(/\s+/).filter((w) => w.length > 0)
}

/** Whether `definition` is the framing's own `trap` function (the only one it defines without its prefix). */
function isFramingTrap(name: string, definition: string): boolean {
  return name === 'trap' && definition.includes('__conch_traps_')
}
