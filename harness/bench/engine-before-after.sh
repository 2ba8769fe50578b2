#!/usr/bin/env bash
# Two harness binaries (say, before and after an engine change) against the
# same nginx `return 200`, in interleaved runs (the order alternates each
# round): requests per second and the generator's own CPU time per request
# (/usr/bin/time user+sys), the medians of the rounds, and AFTER's as
# ratios to BEFORE's. With MIX set, AFTER also runs that mix of --path
# arguments (e.g. MIX='/hello:99 /:1').
#
# CPU time on shared cores moves by ±15% from run to run; with CALLGRIND=1
# each binary's user-space instructions per request are counted too
# (valgrind's callgrind, -n 20,000 and -n 220,000: the difference over
# 200,000 requests, so start-up cancels out), which hardly move.
#
#   git archive OLD | tar -x -C /tmp/old && (cd /tmp/old && cargo build --release -p harness)
#   harness/bench/engine-before-after.sh /tmp/old/target/release/harness target/release/harness
#
# Environment: ROUNDS (default 5), DURATION (s per run, default 5), CONNS
# (default 100), THREADS (engine threads, default: the harness's), ARGS
# (more `harness run` arguments for both binaries, e.g. "--pipeline 16"
# or "--io epoll"), MIX, CALLGRIND.
# nginx is stopped by PID on exit. On 2 shared cores, read the medians.
set -euo pipefail

BEFORE=${1:?usage: $0 BEFORE_BIN AFTER_BIN}
AFTER=${2:?usage: $0 BEFORE_BIN AFTER_BIN}
ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-5}
CONNS=${CONNS:-100}
MIX=${MIX:-}
read -r -a extra <<<"${ARGS:-}"
WORK=$(mktemp -d /tmp/engine-before-after.XXXXXX)
NGINX_PID=

cleanup() {
    if [ -n "$NGINX_PID" ]; then
        kill "$NGINX_PID" 2>/dev/null || true
        wait "$NGINX_PID" 2>/dev/null || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

for tool in nginx jq python3; do
    command -v "$tool" >/dev/null || { echo "missing $tool" >&2; exit 1; }
done
[ -x /usr/bin/time ] || { echo "missing /usr/bin/time: apt-get install time" >&2; exit 1; }

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
PORT=$(free_port)
start_nginx_hello "$WORK/nginx" "$PORT"

threads=()
[ -n "${THREADS:-}" ] && threads=(--threads "$THREADS")

# one LABEL BIN [ARGS...] → appends "rps cpu_us_per_request" to $WORK/LABEL.
one() {
    local label=$1 bin=$2
    shift 2
    /usr/bin/time -f '%U %S' -o "$WORK/time" "$bin" run "$@" -c "$CONNS" -d "${DURATION}s" \
        "${threads[@]}" "${extra[@]}" --format json >"$WORK/run.json"
    local n rps failed cpu
    n=$(jq '.requests.total' "$WORK/run.json")
    rps=$(jq '.requests.per_s' "$WORK/run.json")
    failed=$(jq '.requests.failed' "$WORK/run.json")
    cpu=$(awk '{print $1 + $2}' "$WORK/time")
    [ "$failed" = 0 ] || echo "   ($label: $failed failed requests)" >&2
    python3 -c "print($rps, $cpu * 1e6 / max($n, 1))" >>"$WORK/$label"
    printf '   %-7s %10.0f req/s  %6.2f µs CPU/req\n' "$label" "$rps" "$(tail -1 "$WORK/$label" | cut -d' ' -f2)"
}

url=http://127.0.0.1:$PORT
mix_args=()
for p in $MIX; do mix_args+=(--path "$p"); done
echo "== nginx return 200 on $url, -c $CONNS ${ARGS:-}, ${DURATION}s per run, $ROUNDS rounds"
for r in $(seq 1 "$ROUNDS"); do
    echo "-- round $r"
    if [ $((r % 2)) = 1 ]; then
        one before "$BEFORE" "$url/hello"
        one after "$AFTER" "$url/hello"
    else
        one after "$AFTER" "$url/hello"
        one before "$BEFORE" "$url/hello"
    fi
    [ -z "$MIX" ] || one mix "$AFTER" "$url" "${mix_args[@]}"
done

# ir LABEL BIN [ARGS...] → user-space instructions per request.
ir() {
    local label=$1 bin=$2 n small='' large=''
    shift 2
    for n in 20000 220000; do
        valgrind --tool=callgrind --callgrind-out-file="$WORK/cg.out" "$bin" run "$@" \
            -c 50 -n "$n" --threads 2 "${extra[@]}" --format csv >/dev/null 2>"$WORK/vg.err"
        small=$large
        large=$(grep -oP 'Collected : \K[0-9]+' "$WORK/vg.err")
    done
    printf '   %-7s %8.1f instructions per request (user space)\n' "$label" \
        "$(python3 -c "print(($large - $small) / 200000)")"
}
if [ "${CALLGRIND:-0}" = 1 ]; then
    command -v valgrind >/dev/null || { echo "missing valgrind" >&2; exit 1; }
    echo "== callgrind"
    ir before "$BEFORE" "$url/hello"
    ir after "$AFTER" "$url/hello"
    [ -z "$MIX" ] || ir mix "$AFTER" "$url" "${mix_args[@]}"
fi

python3 - "$WORK" "$MIX" <<'PY'
import statistics, sys, os
work, mix = sys.argv[1], sys.argv[2]
def med(label):
    rows = [tuple(map(float, l.split())) for l in open(os.path.join(work, label))]
    return statistics.median(r[0] for r in rows), statistics.median(r[1] for r in rows)
b, a = med("before"), med("after")
print(f"== medians: before {b[0]:,.0f} req/s {b[1]:.2f} µs/req; after {a[0]:,.0f} req/s {a[1]:.2f} µs/req")
print(f"   after / before: RPS {a[0] / b[0]:.3f}×, CPU per request {a[1] / b[1]:.3f}×")
if mix:
    m = med("mix")
    print(f"   mix ({mix}) / before: RPS {m[0] / b[0]:.3f}×, CPU per request {m[1] / b[1]:.3f}×")
PY
