// The part of a session's init script that makes DEBUG, ERR and RETURN traps behave as in a
// terminal, where no framing runs between the commands a user types.
//
// Model: a run's commands execute inside the framing's `.` at depth 1, and the framing's own
// commands (the `.`, the end call, `:`, the sync line) run at the top level. A `trap` function
// records the user's action for DEBUG, ERR and RETURN and installs bash's trap as a wrapper:
// a guard first decides whether the trap fired for the user (depth 1 or deeper, not inside a
// framing function, not in an internal run), then the user's action runs inline with `$?` as
// bash gave it. `trap`, `trap -p` and `trap -p SIG` print the user's actions, never the wrappers.
// `trap - SIG` leaves bash's trap ignored (`''`): a function cannot unset these traps for good,
// because bash restores them when the function returns.
//
// Without `set -T`, bash's `source` turns DEBUG off for the file it reads, so a run's commands
// would never fire it. When the guard sees DEBUG fire for the run's `.`, it turns `set -T` on
// for that one command and off again at the next firing, before any user code runs. A subshell
// forked in that window (a first command like `( … )`) ignores DEBUG, as it would without -T.
//
// Bash text below uses `%{` for `${` (so it can live in a template) and `@T` for the tag.

/** The three traps that fire around framing commands, in the order bash lists them. */
const FRAMED_TRAPS = ['DEBUG', 'ERR', 'RETURN'] as const

/** What bash's trap runs for one framed trap: the guard, then the user's action with its `$?`. */
function wrapper(kind: string): string {
  // ERR and RETURN actions may fire DEBUG; the guard's and `rc`'s own commands must not, so
  // those wrappers count themselves busy (in an expansion, which fires nothing) until `rc` runs.
  const busy = kind === 'DEBUG' ? 0 : 1
  const count = busy === 0 ? '' : '%{__conch_b_@T[(__conch_b_@T+=1,1)]-}'
  return [
    `if { \\__conch_trap_go_@T ${kind} "$?"; } 2>/dev/null${count}; then if { \\__conch_trap_rc_@T ${busy}; } 2>/dev/null; then`,
    '%{ACTION}',
    'else',
    '%{ACTION}',
    'fi; fi',
  ].join('\n')
}

const SCRIPT = String.raw`
\builtin declare -gA __conch_traps_@T
__conch_rc_@T=0 __conch_ft_@T= __conch_b_@T=0
__conch_trap_go_@T() {
  if [[ $1 == DEBUG ]]; then
    if [[ -n $__conch_ft_@T ]]; then
      __conch_ft_@T=; \builtin set +T
      if [[ $BASHPID != $$ ]]; then \builtin trap -- '' DEBUG; \builtin return 1; fi
    fi
    # Busy inside an ERR or RETURN wrapper; at the top level nothing is, whatever an interrupt
    # left behind.
    if (( __conch_b_@T > 0 )); then
      if (( %{#BASH_SOURCE[@]} < 2 )); then __conch_b_@T=0; else \builtin return 1; fi
    fi
  fi
  __conch_trap_at_@T "$1"
  case $? in
    0) __conch_rc_@T=$2; \builtin return 0 ;;
    2) __conch_b_@T=0 ;;
    *) [[ $1 == DEBUG ]] || __conch_b_@T=$((__conch_b_@T - 1)) ;;
  esac
  \builtin return 1
}
__conch_trap_at_@T() {
  if (( %{__conch_int_@T:-0} )); then \builtin return 1; fi
  if (( %{#BASH_SOURCE[@]} < 3 )); then
    if [[ $1 == DEBUG && $BASH_COMMAND == @SOURCE* && $- != *T* ]]; then __conch_ft_@T=1; \builtin set -T; fi
    \builtin return 2
  fi
  case %{FUNCNAME[2]-} in __conch_*_@T|trap) \builtin return 1 ;; esac
  [[ $BASH_COMMAND != @SOURCE* && $BASH_COMMAND != @HELD* ]]
}
__conch_trap_rc_@T() { __conch_b_@T=$((__conch_b_@T - $1)); \builtin return "$__conch_rc_@T"; }
__conch_trap_say_@T() {
  if [[ -v __conch_traps_@T[$1] ]]; then
    \builtin local __conch_a_@T="%{__conch_traps_@T[$1]}" __conch_q_@T=\' __conch_r_@T="'\\''"
    \builtin printf "trap -- '%s' %s\n" "%{__conch_a_@T//$__conch_q_@T/$__conch_r_@T}" "$1"
  fi
}
trap() {
  { \builtin local -; \builtin set +x; } 2>/dev/null
  \builtin local __conch_a_@T __conch_k_@T __conch_s_@T __conch_trc_@T=0 __conch_w_@T
  \builtin local -a __conch_other_@T
  __conch_other_@T=()
  if [[ $# -eq 0 || $1 == -p || $1 == -- && $# -eq 1 ]]; then
    [[ $# -gt 0 ]] && \builtin shift
    [[ $# -gt 0 && $1 == -- ]] && \builtin shift
    if [[ $# -eq 0 ]]; then
      \builtin trap -p @SIGNALS
      for __conch_k_@T in @FRAMED; do __conch_trap_say_@T "$__conch_k_@T"; done
      \builtin return 0
    fi
    for __conch_s_@T in "$@"; do
      __conch_k_@T=%{__conch_s_@T^^}
      case $__conch_k_@T in
        @CASE) __conch_trap_say_@T "$__conch_k_@T" ;;
        *) \builtin trap -p "$__conch_s_@T" || __conch_trc_@T=$? ;;
      esac
    done
    \builtin return "$__conch_trc_@T"
  fi
  if [[ $1 == -- ]]; then \builtin shift; elif [[ $1 == -?* ]]; then \builtin trap "$@"; \builtin return; fi
  if [[ $# -eq 1 || $1 =~ ^[0-9]+$ ]]; then __conch_a_@T=-; else __conch_a_@T=$1; \builtin shift; fi
  for __conch_s_@T in "$@"; do
    __conch_k_@T=%{__conch_s_@T^^}
    case $__conch_k_@T in
      @CASE)
        if [[ $__conch_a_@T == - ]]; then
          \builtin unset "__conch_traps_@T[$__conch_k_@T]"
          \builtin trap -- '' "$__conch_k_@T"
        else
          __conch_traps_@T[$__conch_k_@T]=$__conch_a_@T
          if [[ -z $__conch_a_@T ]]; then \builtin trap -- '' "$__conch_k_@T"; else
            case $__conch_k_@T in
              @WRAPPERS
            esac
            __conch_w_@T=%{__conch_w_@T//'%{ACTION}'/"$__conch_a_@T"}
            \builtin trap -- "$__conch_w_@T" "$__conch_k_@T"
          fi
        fi ;;
      *) __conch_other_@T+=("$__conch_s_@T") ;;
    esac
  done
  if [[ %{#__conch_other_@T[@]} -gt 0 ]]; then \builtin trap -- "$__conch_a_@T" "%{__conch_other_@T[@]}" || __conch_trc_@T=$?; fi
  \builtin return "$__conch_trc_@T"
}`

/** Signal numbers whose traps `trap -p` lists before the framed ones: EXIT and 1 to 64. */
const SIGNALS = Array.from({ length: 65 }, (_, i) => String(i)).join(' ')

/**
 * The init-script lines that define the `trap` function and its guard, for a shell with `tag`
 * whose runs source command files whose paths start with `commandPrefix`.
 */
export function trapScript(tag: string, commandPrefix: string): string {
  // How bash shows a run's `.` in $BASH_COMMAND (the quoted path without its closing quote,
  // as each run has a file of its own); a trap that fired for it (DEBUG before it, or EXIT
  // after an `exit` inside it) fired for the framing. A held command file's one command
  // (framing-lines.ts) is framing too.
  const source = quote(`. ${quote(commandPrefix).slice(0, -1)}`)
  const held = quote(`__conch_held_${tag} `)
  const wrappers = FRAMED_TRAPS.map((k) => `${k}) __conch_w_@T=${quote(wrapper(k))} ;;`).join(
    '\n              ',
  )
  return SCRIPT.replace('@WRAPPERS', wrappers)
    .replaceAll('@SOURCE', source)
    .replaceAll('@HELD', held)
    .replaceAll('@SIGNALS', SIGNALS)
    .replaceAll('@FRAMED', FRAMED_TRAPS.join(' '))
    .replaceAll('@CASE', FRAMED_TRAPS.join('|'))
    .replaceAll('%{', '${')
    .replaceAll('@T', tag)
    .trimStart()
}

/** Quotes a string for bash as one word. */
function quote(s: string): string {
  return `'${s.replaceAll("'", "'\\''")}'`
}
