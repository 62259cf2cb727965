// The lines the agent writes to a session's bash, and the nonces that mark where runs end.
//
// Every session gets a random tag: its init script defines `__conch_end_<tag>` (called with
// `$?` and a nonce: prints a marker with the nonce and `$?` on fd 62, then one with the nonce
// on fd 63, then returns `$?`),
// two listing helpers, all read-only, and a `trap` function that keeps the user's DEBUG, ERR
// and RETURN traps off the framing's commands (framing-traps.ts). A run is one line that
// sources its command file and then calls the end function with the run's nonce; a sync line
// calls it alone, with a second nonce, after a SIGINT has aborted the run's own line. Nonces
// come from the CSPRNG, so output cannot print a marker that ends a run.
//
// Lines are written ahead of bash (run-window.ts), each run with a command file of its own.
// An interrupt turns the files of lines not yet started into a held body: a call that prints
// markers with a nonce of the held line's own and `$?`, so the agent knows the line ran no
// command and writes the run again later, starting it with `$?` set back. The end function
// stays as it was: a held line costs nothing until an interrupt.
import { randomBytes, randomFillSync } from 'node:crypto'
import { trapScript } from './framing-traps.ts'
import { NONCE_LENGTH } from './marker-scanner.ts'

const NONCE_BYTES = NONCE_LENGTH / 2
/** Random bytes drawn from the CSPRNG in bulk: one draw serves 256 nonces. */
const noncePool = Buffer.alloc(NONCE_BYTES * 256)
let noncePoolAt = noncePool.length

/** A new random nonce for a marker; each pool byte is used once. */
export function newNonce(): string {
  if (noncePoolAt === noncePool.length) {
    randomFillSync(noncePool)
    noncePoolAt = 0
  }
  const nonce = noncePool.toString('hex', noncePoolAt, noncePoolAt + NONCE_BYTES)
  noncePoolAt += NONCE_BYTES
  return nonce
}

/** Quotes a string for bash as one word. */
export function shellQuote(s: string): string {
  return `'${s.replaceAll("'", "'\\''")}'`
}

/** The framing of one session's shell: its init script and the lines that drive its runs. */
export class FramingLines {
  /** The random suffix of this shell's helper function names. */
  readonly #tag = randomBytes(4).toString('hex')

  /**
   * The script bash sources first: no prompts or history, saved fds, and the helper functions;
   * every run's command file path starts with `commandPrefix`.
   */
  initScript(commandPrefix: string): string {
    const t = this.#tag
    return [
      'PS1= PS2= PS0=',
      'set +H',
      // bash has already read $HISTFILE and recorded the init line itself: the list starts empty.
      'set +o history',
      'history -c',
      'shopt -s expand_aliases',
      'unset PROMPT_COMMAND MAILCHECK HISTFILE TMOUT',
      // Sentinels go to saved copies of stdout/stderr. bash's own stderr then points at
      // /dev/null: what bash writes for itself (the newline after a SIGINT, traces of the
      // framing lines) never reaches a run, while each run's command gets the real stderr
      // back through `2>&63` on its line.
      'exec 62>&1 63>&2 2>/dev/null',
      // The end function takes `$?` and the nonce as arguments (no `local` to save `$?`) and
      // writes the stdout marker under its own `>&62`, then the stderr marker. It has no
      // redirection of its own on stderr: it runs after the `.`'s `2>&63` is undone, when bash's
      // stderr is /dev/null again, so its traces under `set -x` go nowhere. The prompt variables
      // are reset only when something set them, with `declare -g`, which a readonly one cannot
      // turn into an error that aborts the function before it returns `$?`.
      // Leading backslashes keep user aliases away; `builtin` keeps user functions named like
      // builtins away. Locals carry the tag, so a user's readonly `rc` or `n` cannot break them.
      `__conch_end_${t}() { \\builtin printf '\\037C%s:%03d\\036' "$2" "$1"; \\builtin printf '\\037C%s\\036' "$2" >&63; [[ -z \${PS0-}\${PS1-}\${PS2-}\${PROMPT_COMMAND[*]+x}\${TMOUT+x} ]] || { \\builtin declare -g PS0= PS1= PS2=; \\builtin unset PROMPT_COMMAND TMOUT; }; \\builtin return "$1"; } >&62`,
      // A held command file calls this with a nonce of its own: it marks the line as held, with
      // the `$?` it was sourced with, and returns 0 (so `set -e` does not end the shell on it).
      `__conch_held_${t}() { \\builtin local __conch_endrc_${t}=$?; \\builtin printf '\\037C%s:%03d\\036' "$1" "$__conch_endrc_${t}" >&62; \\builtin printf '\\037C%s\\036' "$1" >&63; \\builtin return 0; } 2>/dev/null`,
      // Sets `$?` for the next command (after held lines, which leave it 0).
      `__conch_rc_${t}() { \\builtin return "$1"; }`,
      `__conch_env_${t}() { \\builtin local __conch_n_${t} IFS=$'\\n'; for __conch_n_${t} in $(\\builtin compgen -e); do \\builtin printf '%s=%s\\0' "$__conch_n_${t}" "\${!__conch_n_${t}-}"; done; }`,
      `__conch_alias_${t}() { \\builtin local __conch_n_${t}; for __conch_n_${t} in "\${!BASH_ALIASES[@]}"; do \\builtin printf '%s=%s\\0' "$__conch_n_${t}" "\${BASH_ALIASES[$__conch_n_${t}]}"; done; }`,
      trapScript(t, commandPrefix),
      `\\builtin readonly -f __conch_end_${t} __conch_held_${t} __conch_rc_${t} __conch_env_${t} __conch_alias_${t} __conch_trap_go_${t} __conch_trap_at_${t} __conch_trap_rc_${t} __conch_trap_say_${t}`,
      '',
    ].join('\n')
  }

  /** The first line: sources the init script, then marks the shell ready with `nonce`. */
  initLine(initFile: string, nonce: string): string {
    return `. ${shellQuote(initFile)} </dev/null; __conch_end_${this.#tag} $? ${nonce}\n`
  }

  /**
   * A run's line: sources the command file with stdin from `stdinRedirect` (an already quoted
   * word) and the real stderr, then marks the run's end with `nonce`.
   */
  runLine(cmdFile: string, stdinRedirect: string, nonce: string, internal = false, status?: number): string {
    const t = this.#tag
    // After held lines, `$?` is set back to the last run's code before the command starts.
    const before = status === undefined ? '' : `__conch_rc_${t} ${status} && :; `
    const source = `${before}. ${shellQuote(cmdFile)} <${stdinRedirect} 2>&63`
    if (!internal) return `${source}; __conch_end_${t} $? ${nonce} && :\n`
    // An internal run's `.` sits in a group whose redirection sets a flag for the trap guard,
    // and the end call's argument clears it: expansions, which fire no trap (a prefix
    // assignment would stay set in POSIX mode), and nothing on the hot path.
    const set = `\${__conch_int_${t}[(__conch_int_${t}=1)]-}`
    return `{ ${source}; } 61>/dev/null${set}; __conch_end_${t} $? ${nonce}${this.#clearInternal()} && :\n`
  }

  /**
   * What a held command file holds: one call that prints markers with `nonce` (a nonce of the
   * held line's own) and `$?`, runs nothing else and returns 0.
   */
  heldBody(nonce: string): string {
    return `__conch_held_${this.#tag} ${nonce}\n`
  }

  /**
   * A sync line; the leading newline absorbs a byte that bash may drop while it handles a
   * SIGINT, and `&& :` keeps `set -e` from ending the shell on the interrupted run's `$?`.
   */
  syncLine(nonce: string): string {
    return `\n__conch_end_${this.#tag} $? ${nonce}${this.#clearInternal()} && :\n`
  }

  /** An empty expansion that clears the internal-run flag (an interrupt may have skipped it). */
  #clearInternal(): string {
    return `\${__conch_int_${this.#tag}[(__conch_int_${this.#tag}=0)+1]-}`
  }

  /** The name of a helper function defined in the shell (`env` or `alias` listing). */
  helperName(kind: 'env' | 'alias'): string {
    return `__conch_${kind}_${this.#tag}`
  }
}
