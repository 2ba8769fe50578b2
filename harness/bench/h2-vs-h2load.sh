#!/usr/bin/env bash
# HTTP/2 anchors, before the engine can load over HTTP/2 (engine/h2.rs is
# its codec, not wired yet): h2load (Debian's nghttp2-client) against nginx
# h2c (`listen … http2`, nginx 1.22: prior knowledge only) and the
# event-loop server's h2c (same port as HTTP/1.1), GET /hello, in
# interleaved rounds. Per server: h2load's requests per second (median of
# the rounds and their range) and its own CPU per request (user + system,
# /usr/bin/time); the ratio event-loop / nginx per round, with its range.
# Then the HPACK decoder's timing loop (engine::h2's ignored test).
#
#   harness/bench/h2-vs-h2load.sh            # 3 rounds, -c 4 -m 100, 3 s each
#   ROUNDS=5 DURATION=5 CONNS=8 STREAMS=100 harness/bench/h2-vs-h2load.sh
#
# Environment: ROUNDS (3), DURATION (s, 3), CONNS (4), STREAMS (100),
# THREADS (1), WORKERS (1: nginx workers and event loops alike). Needs a
# release build of event-loop (built here if missing). Load goes to
# 127.0.0.1 only; everything started is stopped by PID; every load is
# bounded by its duration (and `timeout`). No --warm-up-time: h2load 1.52
# (bookworm) then reports 0 requests.
set -euo pipefail

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-3}
CONNS=${CONNS:-4}
STREAMS=${STREAMS:-100}
THREADS=${THREADS:-1}
WORKERS=${WORKERS:-1}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
WORK=$(mktemp -d /tmp/h2-vs-h2load.XXXXXX)
PIDS=()

cleanup() {
    for p in "${PIDS[@]}"; do
        kill "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    rm -rf "$WORK"
}
trap cleanup EXIT

command -v h2load >/dev/null || { echo "h2load is missing: apt-get install nghttp2-client" >&2; exit 1; }
command -v nginx >/dev/null || { echo "nginx is missing: apt-get install nginx-light" >&2; exit 1; }
# shellcheck source=harness/bench/lib.sh
. "$ROOT/harness/bench/lib.sh"

if [ ! -x "$TARGET_DIR/release/event-loop" ]; then
    (cd "$ROOT" && cargo build --release -p event-loop)
fi

NGINX_PORT=$(free_port)
mkdir -p "$WORK/nginx/tmp"
cat >"$WORK/nginx/nginx.conf" <<CONF
worker_processes $WORKERS;
daemon off;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $WORK/nginx/tmp;
    keepalive_requests 10000000;
    server {
        listen 127.0.0.1:$NGINX_PORT http2 backlog=4096;
        location / { default_type text/plain; return 200 "Hello World"; }
    }
}
CONF
nginx -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" &
PIDS+=($!)
wait_port "$NGINX_PORT"

"$TARGET_DIR/release/event-loop" --addr 127.0.0.1:0 --workers "$WORKERS" >"$WORK/el.out" 2>"$WORK/el.err" &
PIDS+=($!)
for _ in $(seq 1 100); do
    grep -q "listening on" "$WORK/el.out" && break
    sleep 0.05
done
EL_PORT=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$WORK/el.out" | head -1)
[ -n "$EL_PORT" ] || { echo "event-loop did not start: $(cat "$WORK/el.err")" >&2; exit 1; }

# one_run NAME PORT ROUND: h2load for DURATION s; appends "rps cpu_us_per_req".
one_run() {
    local name=$1 port=$2 round=$3 out="$WORK/$1.$3"
    /usr/bin/time -f "%U %S" -o "$out.time" \
        timeout $((DURATION + 30)) h2load -c "$CONNS" -m "$STREAMS" -t "$THREADS" \
        -D "$DURATION" "http://127.0.0.1:$port/hello" >"$out.txt" 2>&1 || true
    local rps ok failed
    rps=$(sed -n 's/^finished in .*, \([0-9.]*\) req\/s.*/\1/p' "$out.txt")
    ok=$(sed -n 's/^requests: .* \([0-9]*\) succeeded, \([0-9]*\) failed.*/\1/p' "$out.txt")
    failed=$(sed -n 's/^requests: .* succeeded, \([0-9]*\) failed.*/\1/p' "$out.txt")
    if [ -z "$rps" ] || [ -z "$ok" ] || [ "$ok" = 0 ] || [ "$failed" != 0 ]; then
        echo "$name round $round: h2load failed:" >&2
        cat "$out.txt" >&2
        exit 1
    fi
    read -r user sys <"$out.time"
    local cpu
    cpu=$(python3 -c "print(($user + $sys) * 1e6 / $ok)")
    echo "$rps $cpu" >>"$WORK/$name.rows"
}

for r in $(seq 1 "$ROUNDS"); do
    if [ $((r % 2)) = 1 ]; then order="nginx event-loop"; else order="event-loop nginx"; fi
    for s in $order; do
        case $s in
            nginx) one_run nginx "$NGINX_PORT" "$r" ;;
            event-loop) one_run event-loop "$EL_PORT" "$r" ;;
        esac
    done
done

echo "h2load -c $CONNS -m $STREAMS -t $THREADS, ${DURATION}s x $ROUNDS interleaved rounds, GET /hello over h2c; $(nproc) cores, WORKERS=$WORKERS"
python3 - "$WORK/nginx.rows" "$WORK/event-loop.rows" <<'PY'
import statistics, sys
rows = {}
for name, path in (("nginx", sys.argv[1]), ("event-loop", sys.argv[2])):
    rows[name] = [tuple(map(float, l.split())) for l in open(path)]
for name, r in rows.items():
    rps = [x[0] for x in r]; cpu = [x[1] for x in r]
    print(f"{name:<11} h2load rps median {statistics.median(rps):>10.0f} (range {min(rps):.0f}-{max(rps):.0f}),"
          f" h2load CPU {statistics.median(cpu):.2f} us/request")
ratios = [e[0] / n[0] for n, e in zip(rows["nginx"], rows["event-loop"])]
print(f"event-loop / nginx rps: median {statistics.median(ratios):.2f} (range {min(ratios):.2f}-{max(ratios):.2f})")
PY

echo "HPACK decoder (engine::h2, release):"
(cd "$ROOT" && cargo test --release -p harness --lib -- --ignored --nocapture hpack_timing 2>/dev/null | grep "^hpack:")
