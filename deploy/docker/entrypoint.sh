#!/bin/bash
# The image's entrypoint, under tini (PID 1). It prepares what the namespace driver needs of the
# container, reads the API key from a file when asked to, then runs `conch runner` and starts it
# again whenever it exits, so a runner restart (a crash, an upgrade in place, `kill` of the
# runner) keeps every sandbox: agents are detached and the next runner reconnects to them.
# SIGTERM or SIGINT stops the runner and ends the container, which ends every sandbox.
# The runner's node flags come from the `conch` bin (it starts Node again with them, same pid), so
# none are passed here.
# A configuration error (exit 2) is not retried: it ends the container with that code.
set -euo pipefail


log() { printf 'conch-entrypoint: %s\n' "$*" >&2; }

# Docker passes /dev/loop-control (--device) but no /dev/loopN nodes, and no udev creates them
# when the kernel hands out a new loop device, so the nodes are made here for the indices the
# kernel can return. The device cgroup rule `b 7:* rwm` lets them be opened.
make_loop_nodes() {
  [ -c /dev/loop-control ] || return 0
  local count=${CONCH_LOOP_DEVICES:-256} shift=0 max_part i
  max_part=$(cat /sys/module/loop/parameters/max_part 2>/dev/null || echo 0)
  while ((max_part >> shift)); do shift=$((shift + 1)); done
  for ((i = 0; i < count; i++)); do
    [ -e "/dev/loop$i" ] && continue
    mknod -m 0660 "/dev/loop$i" b 7 $((i << shift)) 2>/dev/null || {
      log "cannot create /dev/loop$i (run with --device-cgroup-rule 'b 7:* rwm')"
      return 0
    }
  done
}

# Docker mounts the container's own cgroups read-only; with CAP_SYS_ADMIN they are remounted
# read-write (only this container's subtree is mounted, so nothing else becomes writable).
# On cgroup v2 every process moves from the namespace root into a leaf, `init`, because a
# cgroup with processes cannot hand controllers to children; the runner then creates `conch/`.
prepare_cgroups() {
  if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    mount -o remount,bind,rw /sys/fs/cgroup 2>/dev/null || log "cannot remount /sys/fs/cgroup read-write"
    mkdir -p /sys/fs/cgroup/init
    local pid
    while read -r pid; do
      echo "$pid" > /sys/fs/cgroup/init/cgroup.procs 2>/dev/null || true
    done < /sys/fs/cgroup/cgroup.procs
    return 0
  fi
  local point
  while read -r _ point type _; do
    [ "$type" = cgroup ] || continue
    mount -o remount,bind,rw "$point" 2>/dev/null || log "cannot remount $point read-write"
  done < /proc/mounts
}

if [ "$(id -u)" = 0 ]; then
  make_loop_nodes
  prepare_cgroups
fi

# The state dir's lock names the runner's pid. Pids are numbered per container, so a lock left
# by the previous start of this container (killed, or stopped with SIGKILL) may name a live pid
# of this one; no runner of this container runs yet, so the lock is stale. One state volume
# serves one container.
rm -f "${CONCH_STATE_DIR:-/var/lib/conch}/runner.pid"

# The key from a file (a compose or Kubernetes secret) stays out of `docker inspect`.
if [ -n "${CONCH_API_KEY_FILE:-}" ]; then
  CONCH_API_KEY=$(< "$CONCH_API_KEY_FILE")
  export CONCH_API_KEY
  unset CONCH_API_KEY_FILE
fi

stopping=0
child=
stop() {
  stopping=1
  [ -n "$child" ] && kill -TERM "$child" 2>/dev/null || true
}
trap stop TERM INT

while :; do
  conch runner "$@" &
  child=$!
  status=0
  # `wait` returns early when a trapped signal arrives; wait again until the runner has exited.
  while :; do
    wait "$child" && status=0 || status=$?
    kill -0 "$child" 2>/dev/null || break
  done
  child=
  [ "$stopping" = 1 ] && exit 0
  [ "$status" = 2 ] && { log "the runner refused its configuration; not restarting"; exit 2; }
  log "the runner exited with status $status; starting it again (sandboxes keep running)"
  sleep 1
done
