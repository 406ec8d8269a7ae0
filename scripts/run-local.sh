#!/usr/bin/env bash
# run-local.sh: a dfs cluster as background processes on this machine.
#
#   scripts/run-local.sh start [N]        coordinator and N storage nodes (default 3); returns when
#                                         every node is on the ring
#   scripts/run-local.sh stop             stop everything (coordinator first); fine when nothing runs
#   scripts/run-local.sh status           one line per process: name, pid, port, UP or DOWN
#   scripts/run-local.sh add-node N       start node-N and wait until it is on the ring
#   scripts/run-local.sh kill-node N      SIGKILL node-N: a crash, not a shutdown
#   scripts/run-local.sh restart-node N   stop node-N if it runs, start it, wait until it is on the ring
#
# The coordinator uses PostgreSQL when DATABASE_URL is set and its embedded store otherwise. Every
# process inherits this shell's environment (REDIS_URL, HEALTH_CHECK_INTERVAL, CLUSTER_TOKEN,
# LOG_LEVEL, ...) at the moment it is started; the script sets only addresses, ids and directories.
# Binaries come from ./bin (built with `make build` when one is missing; run it yourself after
# changing the code). For `dfs cluster up`, the foreground equivalent, see README.md.
#
# Settings (environment):
#   DFS_PORT             coordinator port (8080)
#   DFS_NODE_BASE_PORT   node-1's port; node-N listens on DFS_NODE_BASE_PORT+N-1 (9001)
#   DFS_HOST             address every process binds to and advertises (127.0.0.1)
#   DFS_BIN_DIR          the binaries (./bin)
#   DFS_RUN_DIR          data, logs and pid files (./data/run-local): coordinator/, node-N/,
#                        logs/<name>.log, pids/<name>.pid and pids/<name>.port
#   DFS_READY_TIMEOUT    seconds to wait for a process to be ready, or a node to join (60)
#   DFS_STOP_TIMEOUT     seconds a process gets to exit after SIGTERM before SIGKILL (10)
#
# Exit status: 0 on success (status always exits 0: its output is the answer), 1 on failure,
# 2 on bad usage.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN_DIR=${DFS_BIN_DIR:-$ROOT/bin}
RUN_DIR=${DFS_RUN_DIR:-$ROOT/data/run-local}
HOST=${DFS_HOST:-127.0.0.1}
COORD_PORT=${DFS_PORT:-8080}
NODE_BASE_PORT=${DFS_NODE_BASE_PORT:-9001}
READY_TIMEOUT=${DFS_READY_TIMEOUT:-60}
STOP_TIMEOUT=${DFS_STOP_TIMEOUT:-10}
# Absolute, because make runs in ROOT and the processes may outlive this
# directory as the caller's working directory.
[[ $BIN_DIR == /* ]] || BIN_DIR=$PWD/$BIN_DIR
[[ $RUN_DIR == /* ]] || RUN_DIR=$PWD/$RUN_DIR
PID_DIR=$RUN_DIR/pids
LOG_DIR=$RUN_DIR/logs
COORDINATOR=coordinator

die() {
  echo "run-local: $*" >&2
  exit 1
}

usage() {
  sed -n '4,10s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
  exit 2
}

is_count() { [[ $1 =~ ^[1-9][0-9]{0,2}$ ]]; }

for setting in DFS_PORT:"$COORD_PORT" DFS_NODE_BASE_PORT:"$NODE_BASE_PORT" \
  DFS_READY_TIMEOUT:"$READY_TIMEOUT" DFS_STOP_TIMEOUT:"$STOP_TIMEOUT"; do
  [[ ${setting#*:} =~ ^[1-9][0-9]*$ ]] || die "${setting%%:*}=${setting#*:}: want a positive whole number"
done

# binary_of NAME: the executable a process of that name runs.
binary_of() {
  if [[ $1 == "$COORDINATOR" ]]; then echo coordinator; else echo storage-node; fi
}

# pid_alive PID succeeds when PID is a process that has not exited (a zombie
# has).
pid_alive() {
  local stat
  stat=$(ps -p "$1" -o stat= 2>/dev/null) || return 1
  [[ $stat != Z* ]]
}

# running_pid NAME prints the pid of NAME and succeeds if its pid file names a
# live process of the right binary; a recycled pid does not count.
running_pid() {
  local file=$PID_DIR/$1.pid pid comm
  [[ -f $file ]] || return 1
  pid=$(<"$file")
  [[ $pid =~ ^[0-9]+$ ]] && pid_alive "$pid" || return 1
  comm=$(ps -p "$pid" -o comm= 2>/dev/null) || return 1
  [[ $comm == *"$(binary_of "$1")" ]] || return 1
  echo "$pid"
}

# port_of NAME: the port NAME was started on, else the one it would get now.
port_of() {
  local file=$PID_DIR/$1.port
  if [[ -f $file ]]; then
    cat "$file"
  elif [[ $1 == "$COORDINATOR" ]]; then
    echo "$COORD_PORT"
  else
    echo $((NODE_BASE_PORT + ${1#node-} - 1))
  fi
}

# port_busy PORT succeeds when something accepts connections on HOST:PORT.
port_busy() { (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null; }

# probe URL: healthprobe's one-line answer; fails unless the status is 200.
probe() { "$BIN_DIR/healthprobe" -timeout 5s "$1" 2>/dev/null; }

is_ready() { probe "http://$HOST:$1/health/ready" >/dev/null; }

coordinator_url() { echo "http://$HOST:$(port_of "$COORDINATOR")"; }

# on_ring NODE succeeds when the coordinator has NODE on its ring.
on_ring() {
  local answer
  answer=$(probe "$(coordinator_url)/api/nodes/$1") || return 1
  [[ $answer =~ \"onRing\":\ *true ]]
}

ensure_binaries() {
  local b missing=""
  for b in coordinator storage-node healthprobe; do
    [[ -x $BIN_DIR/$b ]] || missing="$missing $b"
  done
  [[ -z $missing ]] && return 0
  command -v make >/dev/null || die "missing in $BIN_DIR:$missing, and make is not installed to build them"
  echo "run-local: building$missing into $BIN_DIR (make build)" >&2
  make -C "$ROOT" build BIN="$BIN_DIR" >&2 || die "make build failed"
}

# launch NAME PORT VAR=VALUE... starts NAME in the background and records its
# pid and port. The process gets its own log; stdin and stdout are detached so
# that nobody waiting on this script's output waits on the cluster too.
launch() {
  local name=$1 port=$2 pid
  shift 2
  if pid=$(running_pid "$name"); then
    die "$name is already running (pid $pid)"
  fi
  if port_busy "$port"; then
    die "port $port for $name is already in use by another program on $HOST; stop it, or choose other ports with DFS_PORT and DFS_NODE_BASE_PORT"
  fi
  mkdir -p "$PID_DIR" "$LOG_DIR"
  echo "--- $(date '+%Y-%m-%dT%H:%M:%S%z') run-local starts $name on port $port" >>"$LOG_DIR/$name.log"
  env "$@" SERVER_HOST="$HOST" SERVER_PORT="$port" \
    nohup "$BIN_DIR/$(binary_of "$name")" </dev/null >>"$LOG_DIR/$name.log" 2>&1 &
  pid=$!
  echo "$pid" >"$PID_DIR/$name.pid"
  echo "$port" >"$PID_DIR/$name.port"
}

launch_coordinator() {
  launch "$COORDINATOR" "$COORD_PORT" DATA_DIRECTORY="$RUN_DIR/coordinator"
}

launch_node() {
  local name=node-$1 port
  port=$(port_of "$name")
  launch "$name" "$port" \
    STORAGE_NODE_ID="$name" \
    STORAGE_DATA_DIRECTORY="$RUN_DIR/$name" \
    STORAGE_ADVERTISED_HOST="$HOST" \
    STORAGE_ADVERTISED_PORT="$port" \
    COORDINATOR_URL="$(coordinator_url)"
}

# await CHECK NAME...: wait until every NAME is running and CHECK NAME succeeds,
# at most READY_TIMEOUT seconds. A process that exits meanwhile fails at once
# with the end of its log.
await() {
  local check=$1 name pending
  shift
  local deadline=$((SECONDS + READY_TIMEOUT))
  while :; do
    pending=()
    for name in "$@"; do
      # Not running_pid: right after launch the process may not have
      # exec'd its binary yet.
      if ! pid_alive "$(<"$PID_DIR/$name.pid")"; then
        echo "run-local: $name exited; the end of $LOG_DIR/$name.log:" >&2
        tail -n 20 "$LOG_DIR/$name.log" >&2 || true
        exit 1
      fi
      "$check" "$name" || pending+=("$name")
    done
    ((${#pending[@]} == 0)) && return 0
    ((SECONDS >= deadline)) && die "gave up after ${READY_TIMEOUT}s waiting for ${pending[*]} ($check); logs are in $LOG_DIR"
    sleep 0.2
  done
}

ready_check() { is_ready "$(port_of "$1")"; }
join_check() { ready_check "$1" && on_ring "$1"; }

# await_nodes NAME...: ready, and on the ring when the coordinator is up to say so.
await_nodes() {
  if running_pid "$COORDINATOR" >/dev/null && is_ready "$(port_of "$COORDINATOR")"; then
    await join_check "$@"
  else
    await ready_check "$@"
    echo "run-local: the coordinator is down; $* will join the ring when it is back"
  fi
}

# stop_procs NAME...: SIGTERM each running one, wait, then SIGKILL stragglers.
stop_procs() {
  local name pid pids=() names=()
  for name in "$@"; do
    if pid=$(running_pid "$name"); then
      kill -TERM "$pid" 2>/dev/null || true
      pids+=("$pid")
      names+=("$name")
    fi
    rm -f "$PID_DIR/$name.pid"
  done
  ((${#pids[@]} == 0)) && return 0
  local deadline=$((SECONDS + STOP_TIMEOUT)) i alive
  while :; do
    alive=0
    for i in "${!pids[@]}"; do
      if pid_alive "${pids[$i]}"; then
        alive=1
        if ((SECONDS >= deadline)); then
          echo "run-local: ${names[$i]} did not stop within ${STOP_TIMEOUT}s; killing it" >&2
          kill -KILL "${pids[$i]}" 2>/dev/null || true
        fi
      fi
    done
    ((alive == 0)) && break
    sleep 0.1
  done
  for name in "${names[@]}"; do echo "$name stopped"; done
}

# running_names: every process of this run directory that is running.
running_names() {
  local name
  for name in "$COORDINATOR" $(node_names); do
    if running_pid "$name" >/dev/null; then echo "$name"; fi
  done
}

# node_names: every node this run directory knows, in numeric order.
node_names() {
  local f
  [[ -d $PID_DIR ]] || return 0
  for f in "$PID_DIR"/node-*.pid "$PID_DIR"/node-*.port; do
    [[ -e $f ]] || continue
    f=${f##*/}
    echo "${f%.*}"
  done | sort -t- -k2,2n -u
}

cmd_start() {
  local n=${1:-3} i name names=() running
  is_count "$n" || die "start: want a node count from 1 to 999, got '$n'"
  ensure_binaries
  running=$(running_names | tr '\n' ' ')
  if [[ -n $running ]]; then
    die "a cluster is already running from $RUN_DIR (${running% }); stop it first: $0 stop"
  fi
  # Check every port before starting anything, so that a busy one leaves
  # nothing half-started behind.
  for ((i = 0; i < n; i++)); do
    port_busy $((NODE_BASE_PORT + i)) &&
      die "port $((NODE_BASE_PORT + i)) for node-$((i + 1)) is already in use by another program on $HOST; stop it, or choose other ports with DFS_PORT and DFS_NODE_BASE_PORT"
  done
  rm -f "$PID_DIR"/*.port
  # A start that fails halfway leaves nothing running behind it.
  trap 'abandon_start $?' EXIT
  launch_coordinator
  await ready_check "$COORDINATOR"
  if [[ -n ${DATABASE_URL:-} ]]; then
    echo "coordinator started (pid $(<"$PID_DIR/$COORDINATOR.pid"), port $COORD_PORT, metadata in PostgreSQL from DATABASE_URL)"
  else
    echo "coordinator started (pid $(<"$PID_DIR/$COORDINATOR.pid"), port $COORD_PORT, metadata in $RUN_DIR/coordinator)"
  fi
  for ((i = 1; i <= n; i++)); do
    launch_node "$i"
    names+=("node-$i")
  done
  await_nodes "${names[@]}"
  for name in "${names[@]}"; do
    echo "$name started (pid $(<"$PID_DIR/$name.pid"), port $(port_of "$name"))"
  done
  trap - EXIT
  local noun=nodes
  ((n == 1)) && noun=node
  echo "cluster ready at $(coordinator_url) with $n $noun; logs in $LOG_DIR"
}

# abandon_start STATUS: the EXIT trap of a start; on failure it stops whatever
# the start had started.
abandon_start() {
  (($1 == 0)) && return 0
  local names
  mapfile -t names < <(running_names)
  if ((${#names[@]} > 0)); then
    echo "run-local: start failed; stopping ${names[*]}" >&2
    stop_procs "${names[@]}" >/dev/null
  fi
  rm -f "$PID_DIR"/*.pid "$PID_DIR"/*.port
}

cmd_stop() {
  local names
  mapfile -t names < <(running_names)
  if ((${#names[@]} == 0)); then
    echo "nothing running"
  else
    # The coordinator first: nodes vanishing under a running coordinator
    # would look like failures and set off repairs.
    stop_procs "$COORDINATOR"
    stop_procs "${names[@]}"
  fi
  rm -f "$PID_DIR"/*.pid "$PID_DIR"/*.port
}

cmd_status() {
  local name pid port state
  if [[ ! -f $PID_DIR/$COORDINATOR.port ]] && [[ -z $(node_names) ]]; then
    echo "no cluster started from $RUN_DIR"
    return 0
  fi
  for name in "$COORDINATOR" $(node_names); do
    port=$(port_of "$name")
    state=DOWN
    if pid=$(running_pid "$name"); then
      [[ -x $BIN_DIR/healthprobe ]] && is_ready "$port" && state=UP
    else
      pid=-
    fi
    printf '%-12s %-8s %-6s %s\n' "$name" "$pid" "$port" "$state"
  done
}

# node_arg CMD ARGS...: the name of the node that ARGS (one number) names.
node_arg() {
  [[ $# -eq 2 ]] || usage
  is_count "$2" || die "$1: want a node number from 1 to 999, got '$2'"
  echo "node-$2"
}

cmd_add_node() {
  local name
  name=$(node_arg add-node "$@")
  ensure_binaries
  launch_node "${name#node-}"
  await_nodes "$name"
  echo "$name started (pid $(<"$PID_DIR/$name.pid"), port $(port_of "$name"))"
}

cmd_kill_node() {
  local name pid
  name=$(node_arg kill-node "$@")
  if ! pid=$(running_pid "$name"); then
    [[ -f $PID_DIR/$name.port ]] || die "kill-node: $name was never started from $RUN_DIR"
    echo "$name is not running"
    return 0
  fi
  kill -KILL "$pid"
  local deadline=$((SECONDS + STOP_TIMEOUT))
  while running_pid "$name" >/dev/null; do
    ((SECONDS >= deadline)) && die "$name (pid $pid) is still there ${STOP_TIMEOUT}s after SIGKILL"
    sleep 0.1
  done
  rm -f "$PID_DIR/$name.pid"
  echo "$name killed (SIGKILL, pid $pid)"
}

cmd_restart_node() {
  local name
  name=$(node_arg restart-node "$@")
  [[ -f $PID_DIR/$name.port ]] || die "restart-node: $name was never started from $RUN_DIR; use add-node"
  ensure_binaries
  stop_procs "$name" >/dev/null
  launch_node "${name#node-}"
  await_nodes "$name"
  echo "$name restarted (pid $(<"$PID_DIR/$name.pid"), port $(port_of "$name"))"
}

[[ $# -ge 1 ]] || usage
command=$1
shift
case $command in
start)
  [[ $# -le 1 ]] || usage
  cmd_start "$@"
  ;;
stop)
  [[ $# -eq 0 ]] || usage
  cmd_stop
  ;;
status)
  [[ $# -eq 0 ]] || usage
  cmd_status
  ;;
add-node) cmd_add_node "$@" ;;
kill-node) cmd_kill_node "$@" ;;
restart-node) cmd_restart_node "$@" ;;
-h | --help | help) sed -n '4,10s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" ;;
*) usage ;;
esac
