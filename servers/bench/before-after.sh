#!/usr/bin/env bash
# What a change to the reference servers cost on /hello and /work: the three Rust
# servers built at REV (default: the parent of HEAD) and at the working
# tree, loaded in turn (before, after, after, before, ...) by wrk -t1 -c50,
# ROUNDS rounds of DURATION each. For every server and side: wrk's req/s
# and the server's own CPU per request (every thread's schedstat time over
# the round, divided by wrk's request count), as medians with the
# rounds' range, and after/before as ratios pair by pair. Rounds with
# socket errors or non-2xx answers are listed under the table. /work's database is a
# private MariaDB the bench starts (its CPU is not the server's).
# Everything runs on 127.0.0.1 and is stopped by PID at exit.
#
#   servers/bench/before-after.sh [REV] [ROUNDS] [DURATION] [PATHS]
#   # defaults: HEAD~1 5 5s "/hello /work"
#
# REV's build is kept in $BEFORE_TARGET (default /tmp/bench-before-target)
# for the next call.
set -euo pipefail
cd "$(dirname "$0")/../.."
REV=${1:-HEAD~1}
ROUNDS=${2:-5}
DURATION=${3:-5s}
read -r -a PATHS <<<"${4:-/hello /work}"
BEFORE_TARGET=${BEFORE_TARGET:-/tmp/bench-before-target}
SERVERS=(event-loop coroutine worker-pool)
for tool in wrk curl mariadb-install-db; do
  command -v "$tool" >/dev/null || { echo "missing $tool: run scripts/install-deps" >&2; exit 1; }
done
SHA=$(git rev-parse --verify "$REV^{commit}") || { echo "no such revision: $REV" >&2; exit 2; }

WORK=$(mktemp -d /tmp/bench-before-after.XXXXXX)
PID=
DB_PID=
cleanup() {
  for p in ${PID:-} ${DB_PID:-}; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  git worktree remove --force "$WORK/src" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

echo "building $REV (${SHA:0:8}) and the working tree, release ..." >&2
git worktree add -q --detach "$WORK/src" "$SHA"
(cd "$WORK/src" && CARGO_TARGET_DIR=$BEFORE_TARGET cargo build --release --locked -q -p event-loop -p coroutine -p worker-pool)
cargo build --release --locked -q -p event-loop -p coroutine -p worker-pool
declare -A BIN=([before]="$BEFORE_TARGET/release" [after]="target/release")
. servers/bench/private-mariadb.sh
start_private_mariadb "$WORK"

# CPU time of every thread of a process, in ns.
cpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {print s + 0}'; }

# Starts side's server; sets PID and PORT. Empty PORT: it did not announce
# itself within 30 s (it is stopped).
start() { # side server
  "${BIN[$1]}/$2" --addr 127.0.0.1:0 --mysql-url "$URL" >"$WORK/out" 2>"$WORK/err" &
  PID=$!
  for _ in $(seq 1 600); do grep -q "listening on" "$WORK/out" 2>/dev/null && break; sleep 0.05; done
  PORT=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$WORK/out")
  if [ -z "$PORT" ]; then
    echo "$1 $2 did not start in 30 s (threads waiting in: $(sort /proc/"$PID"/task/*/wchan 2>/dev/null | uniq -c | tr '\n' ' ')): $(cat "$WORK/err")" >&2
    stop
  fi
}
stop() { kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; PID=; }

# Whether the server on PORT answers /hello and PATH (a few tries).
answers() { # path
  local answer= _
  for _ in 1 2 3; do
    answer=$(curl -s --max-time 5 "http://127.0.0.1:$PORT/hello") && [ "$answer" = "Hello World" ] &&
      curl -sf --max-time 5 -o /dev/null "http://127.0.0.1:$PORT$1" && return 0
    sleep 0.5
  done
  echo "no answer from ${PORT:-a server that did not start} (threads waiting in: $(for t in /proc/"$PID"/task/*/wchan; do cat "$t" 2>/dev/null; echo -n ' '; done))" >&2
  return 1
}

# One round: appends "server+path side round req/s µs-per-request" to rows.
# A server that does not start or answer is started again (three tries:
# on a busy machine one in a few hundred starts has hung here, before and
# after alike; each such start is said on stderr).
round() { # side server path round
  local try
  for try in 1 2 3; do
    start "$1" "$2"
    [ -n "$PORT" ] && answers "$3" && break
    stop
    [ "$try" = 3 ] && { echo "$1 $2: no answer in three starts" >&2; exit 1; }
    echo "$1 $2: started again" >&2
  done
  local c0 c1
  c0=$(cpu_ns "$PID")
  wrk -t1 -c50 -d"$DURATION" "http://127.0.0.1:$PORT$3" >"$WORK/wrk"
  c1=$(cpu_ns "$PID")
  stop
  # Errors do not stop the bench; each is listed under the table.
  if grep -qE "Socket errors|Non-2xx" "$WORK/wrk"; then
    echo "$1 $2 $3, round $4:$(grep -E 'Socket errors|Non-2xx' "$WORK/wrk" | tr -s ' ' | tr '\n' ';')" >>"$WORK/errors"
  fi
  local n rps
  n=$(awk '/requests in/ {print $1}' "$WORK/wrk")
  rps=$(awk '/^Requests\/sec/ {print $2}' "$WORK/wrk")
  echo "$2$3 $1 $4 $rps $(awk -v c=$((c1 - c0)) -v n="$n" 'BEGIN {printf "%.2f", c / n / 1000}')" >>"$WORK/rows"
}

for r in $(seq 1 "$ROUNDS"); do
  for path in "${PATHS[@]}"; do
    for s in "${SERVERS[@]}"; do
      if [ $((r % 2)) = 1 ]; then order="before after"; else order="after before"; fi
      for side in $order; do round "$side" "$s" "$path" "$r"; done
      echo "round $r/$ROUNDS: $s $path" >&2
    done
  done
done

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "before: $REV (${SHA:0:8}); after: the working tree ($(git rev-parse --short HEAD)$(git diff --quiet || echo ', modified')); wrk -t1 -c50 -d$DURATION ${PATHS[*]}, $ROUNDS rounds"
python3 - "$WORK/rows" <<'PY'
import sys, statistics as st
rows = [l.split() for l in open(sys.argv[1])]
def med(v): return f"{st.median(v):,.2f} [{min(v):,.2f}–{max(v):,.2f}]"
print(f"{'server, path':<18} {'before req/s':>28} {'after req/s':>28} {'after/before':>22} {'before µs/req':>24} {'after µs/req':>24} {'after/before':>22}")
for s in dict.fromkeys(r[0] for r in rows):
    side = lambda k, i: [float(r[3 + i]) for r in rows if r[0] == s and r[1] == k]
    b_rps, a_rps, b_cpu, a_cpu = side("before", 0), side("after", 0), side("before", 1), side("after", 1)
    rps_ratio = [a / b for a, b in zip(a_rps, b_rps)]
    cpu_ratio = [a / b for a, b in zip(a_cpu, b_cpu)]
    print(f"{s:<18} {med(b_rps):>28} {med(a_rps):>28} {med(rps_ratio):>22} {med(b_cpu):>24} {med(a_cpu):>24} {med(cpu_ratio):>22}")
PY
if [ -s "$WORK/errors" ]; then echo "rounds with errors (wrk's count):"; sed 's/^/  /' "$WORK/errors"; else echo "no round had a socket error or a non-2xx answer"; fi
