#!/usr/bin/env bash
# demo.sh — the seed's twelve-step walk through dfs, against a local cluster.
#
#   scripts/demo.sh            # against a cluster already started with scripts/run-local.sh
#   scripts/demo.sh --start    # start one first (and stop it at the end)
#
# It fails (non-zero exit) on any byte mismatch, if the read after the stop is
# served by the stopped node, if bringing the node back creates any copy, or
# if the files that move when a fourth node joins differ from what the ring
# predicts. DEMO_PAUSE (seconds, default 1; 0 under CI) paces the steps.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)
BASE=${DFS_URL:-http://localhost:${DFS_PORT:-8080}}
export DFS_URL=$BASE
RUN="$ROOT/scripts/run-local.sh"
DFS="$ROOT/bin/dfs"
PAUSE=${DEMO_PAUSE:-1}
[ -n "${CI:-}" ] && [ -z "${DEMO_PAUSE:-}" ] && PAUSE=0
START=false
[ "${1:-}" = "--start" ] && START=true

WORK=$(mktemp -d)
cleanup() {
  rm -rf "$WORK"
  if $START; then "$RUN" stop >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; sleep "$PAUSE"; }
fail() { printf '\nDEMO FAILED: %s\n' "$*" >&2; exit 1; }
api() { curl -fsS "$@"; }

# admit sweeps the detector twice, so state changes don't wait for its timer.
admit() { api -X POST "$BASE/api/admin/health-check" >/dev/null; api -X POST "$BASE/api/admin/health-check" >/dev/null; }

wait_for() { # wait_for <seconds> <command…>
  local limit=$1; shift
  for _ in $(seq 1 $((limit * 10))); do "$@" && return 0; sleep 0.1; done
  return 1
}
ring_size() { api "$BASE/api/nodes/ring" | jq -r .physicalNodes; }
ring_has() { [ "$(ring_size)" = "$1" ]; }
metric() { # metric <name> <trigger>: a rebalance counter from the coordinator's metrics
  api "$BASE/metrics" | awk -v m="$1{trigger=\"$2\"}" '$1 == m {print $2}'
}
runs_past() { [ "$(metric dfs_rebalance_runs_total "$1")" -gt "$2" ]; } # a run of trigger $1 finished since count $2
port_of() { api "$BASE/api/nodes/$1" | jq -r .port; }

step "1. Start the cluster"
[ -x "$DFS" ] || make -s build
if $START; then "$RUN" start 3; fi
api "$BASE/health/ready" >/dev/null || fail "no coordinator at $BASE (start one with scripts/run-local.sh start, or pass --start)"

step "2. Nodes register themselves; the ring and each node's measured share"
admit
wait_for 30 ring_has 3 || fail "three nodes did not join the ring"
"$DFS" nodes
api "$BASE/api/nodes/ring" | jq -c '.nodes[]'

step "3. Upload six files"
IDS=()
for i in 1 2 3 4 5 6; do
  head -c $((4096 * i + i)) /dev/urandom > "$WORK/file-$i.bin"
  id=$("$DFS" put -q -json "$WORK/file-$i.bin" | jq -r '.fileId // .[0].fileId')
  [ -n "$id" ] && [ "$id" != null ] || fail "upload of file-$i.bin returned no id"
  IDS+=("$id")
  echo "file-$i.bin -> $id"
done

step "4. Where each file lives, and how many copies each node holds"
for id in "${IDS[@]}"; do
  api "$BASE/api/files/$id/metadata" | jq -c '{fileId, status, primaryNode, copies: [.replicas[] | select(.status=="ACTIVE") | .nodeId]}'
done
for id in "${IDS[@]}"; do api "$BASE/api/files/$id/metadata" | jq -r '.replicas[] | select(.status=="ACTIVE") | .nodeId'; done \
  | sort | uniq -c | awk '{print "  " $2 ": " $1 " copies"}'

step "5. Download and compare with the original"
for i in 1 2 3 4 5 6; do
  "$DFS" get -q -o "$WORK/back-$i.bin" "${IDS[$((i - 1))]}"
  cmp -s "$WORK/file-$i.bin" "$WORK/back-$i.bin" || fail "file-$i.bin came back different"
done
echo "all six files identical"

FILE=${IDS[0]}
PRIMARY=$(api "$BASE/api/files/$FILE/metadata" | jq -r .primaryNode)
PNUM=${PRIMARY#node-}
step "6. Stop $PRIMARY, the primary of $FILE"
"$RUN" kill-node "$PNUM"

step "7. The detector notices (two failed probes)"
admit
api "$BASE/api/nodes/$PRIMARY" | jq -c '{nodeId, status, onRing}'

step "8. Download $FILE again: a replica serves it"
SERVED=$(curl -fsS -D - -o "$WORK/again.bin" "$BASE/api/files/$FILE" | tr -d '\r' | awk -F': ' 'tolower($1) == "x-served-by-node" {print $2}')
echo "X-Served-By-Node: $SERVED"
[ -n "$SERVED" ] || fail "no X-Served-By-Node header"
[ "$SERVED" != "$PRIMARY" ] || fail "the stopped node $PRIMARY served the read"
cmp -s "$WORK/file-1.bin" "$WORK/again.bin" || fail "the replica's bytes differ"

step "9. Restart $PRIMARY: its copies are re-adopted, not copied"
BEFORE=$(metric dfs_rebalance_copies_created_total RECOVERED)
RUNS=$(metric dfs_rebalance_runs_total RECOVERED)
"$RUN" restart-node "$PNUM"
admit
wait_for 30 ring_has 3 || fail "$PRIMARY did not come back"
wait_for 60 runs_past RECOVERED "$RUNS" || fail "the recovery rebalance did not finish"
AFTER=$(metric dfs_rebalance_copies_created_total RECOVERED)
echo "copies created by the recovery: $((AFTER - BEFORE))"
[ "$AFTER" = "$BEFORE" ] || fail "re-adoption created $((AFTER - BEFORE)) copies"
for id in "${IDS[@]}"; do
  [ "$(api "$BASE/api/files/$id/metadata" | jq -r .status)" = ACTIVE ] || fail "$id is not ACTIVE after the recovery"
done

step "10. A fourth node joins: only the files whose preference list changes move"
RUNS=$(metric dfs_rebalance_runs_total JOINED)
"$RUN" add-node 4
admit
wait_for 30 ring_has 4 || fail "node-4 did not join"
wait_for 60 runs_past JOINED "$RUNS" || fail "the join rebalance did not finish"
PREDICTED=$( { echo "ADD node-1"; echo "ADD node-2"; echo "ADD node-3"; echo "ADD node-4";
  for id in "${IDS[@]}"; do echo "REPLICAS $id 3"; done; } | "$DFS" ring | paste -d' ' <(printf '%s\n' "${IDS[@]}") - \
  | awk '$2 ~ /(^|,)node-4(,|$)/ {print $1}' | sort)
ACTUAL=$(for id in "${IDS[@]}"; do
  api "$BASE/api/files/$id/metadata" | jq -r 'select([.replicas[] | select(.status=="ACTIVE") | .nodeId] | index("node-4")) | .fileId'
done | sort)
echo "predicted to move: ${PREDICTED:-none}" | tr '\n' ' '; echo
echo "moved:             ${ACTUAL:-none}" | tr '\n' ' '; echo
[ "$PREDICTED" = "$ACTUAL" ] || fail "the files on node-4 differ from the ring's prediction"

step "11. Verify every copy's checksum"
for id in "${IDS[@]}"; do
  out=$(api -X POST "$BASE/api/files/$id/verify")
  echo "$out" | jq -c '{fileId, status, healthyCopies, results: [.copies[].result]}'
  [ "$(echo "$out" | jq -r '[.copies[] | select(.result != "OK")] | length')" = 0 ] || fail "$id has a bad copy"
  [ "$(echo "$out" | jq -r .healthyCopies)" = 3 ] || fail "$id does not have 3 healthy copies"
done

step "12. Clean up"
for id in "${IDS[@]}"; do "$DFS" rm "$id" >/dev/null; done
echo "six files deleted"
printf '\nDEMO PASSED\n'
