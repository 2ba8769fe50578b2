#!/usr/bin/env bash
# The engine over HTTP/2 against h2load (Debian's nghttp2-client), same
# servers, same shape: `harness run --h2c --streams STREAMS -c CONNS`
# against `h2load -c CONNS -m STREAMS`, GET /hello on nginx h2c (`listen …
# http2`, nginx 1.22: prior knowledge only) and the event-loop server's h2c
# (same port as HTTP/1.1), in interleaved rounds (the order of servers and
# of clients alternates). Per server and client: requests per second
# (median of the rounds, range) and the client's own CPU per request (user
# + system, /usr/bin/time); per server, the engine / h2load ratios of CPU
# per request and RPS, per round, median and range. The engine verifies
# every response (status and exact body); h2load counts them. Then the
# HPACK decoder's timing loop (engine::h2's ignored test).
#
#   harness/bench/h2-vs-h2load.sh            # 3 rounds, -c 4 -m 100, 3 s each
#   ROUNDS=5 DURATION=5 CONNS=8 STREAMS=100 harness/bench/h2-vs-h2load.sh
#   TLS=1 harness/bench/h2-vs-h2load.sh      # h2 by ALPN over TLS 1.3 (one lab certificate)
#
# Environment: ROUNDS (3), DURATION (s, 3), CONNS (4), STREAMS (100),
# THREADS (1: h2load -t and the engine's --threads), WORKERS (1: nginx
# workers and event loops alike), IO (uring: the engine's --io), TLS (0; 1:
# h2 over TLS 1.3 instead of h2c, both servers given one certificate from
# `harness certs`, the engine's --h2 trusting only its CA, h2load
# negotiating h2 by ALPN). Needs
# release builds of event-loop and harness (built here if missing). Load
# goes to 127.0.0.1 only; everything started is stopped by PID; every load
# is bounded by its duration (and `timeout`). HPACK=0 skips the decoder's
# timing loop (a release build of the test). No --warm-up-time: h2load
# 1.52 (bookworm) then reports 0 requests.
set -euo pipefail

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-3}
CONNS=${CONNS:-4}
STREAMS=${STREAMS:-100}
THREADS=${THREADS:-1}
WORKERS=${WORKERS:-1}
IO=${IO:-uring}
TLS=${TLS:-0}
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

if [ ! -x "$TARGET_DIR/release/event-loop" ] || [ ! -x "$TARGET_DIR/release/harness" ]; then
    (cd "$ROOT" && cargo build --release -p event-loop -p harness)
fi
HARNESS=$TARGET_DIR/release/harness

# h2c, or h2 over TLS: what each side is given.
if [ "$TLS" = 1 ]; then
    "$HARNESS" certs "$WORK/cert" >/dev/null
    SCHEME=https PROTO=h2 ENGINE_FLAGS=(--h2 --cacert "$WORK/cert/ca.pem")
    NGINX_LISTEN="ssl http2"
    NGINX_TLS="ssl_certificate $WORK/cert/cert.pem; ssl_certificate_key $WORK/cert/key.pem; ssl_protocols TLSv1.3;"
    EL_FLAGS=(--tls-cert "$WORK/cert/cert.pem" --tls-key "$WORK/cert/key.pem")
else
    SCHEME=http PROTO=h2c ENGINE_FLAGS=(--h2c)
    NGINX_LISTEN="http2" NGINX_TLS="" EL_FLAGS=()
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
        listen 127.0.0.1:$NGINX_PORT $NGINX_LISTEN backlog=4096;
        $NGINX_TLS
        location / { default_type text/plain; return 200 "Hello World"; }
    }
}
CONF
nginx -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" &
PIDS+=($!)
wait_port "$NGINX_PORT"

"$TARGET_DIR/release/event-loop" --addr 127.0.0.1:0 --workers "$WORKERS" "${EL_FLAGS[@]}" >"$WORK/el.out" 2>"$WORK/el.err" &
PIDS+=($!)
for _ in $(seq 1 100); do
    grep -q "listening on" "$WORK/el.out" && break
    sleep 0.05
done
EL_PORT=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$WORK/el.out" | head -1)
[ -n "$EL_PORT" ] || { echo "event-loop did not start: $(cat "$WORK/el.err")" >&2; exit 1; }

# one_run NAME PORT ROUND: h2load for DURATION s; appends "rps cpu_us_per_req"
# to NAME.h2load.rows.
one_run() {
    local name=$1 port=$2 round=$3 out="$WORK/$1.$3"
    /usr/bin/time -f "%U %S" -o "$out.time" \
        timeout $((DURATION + 30)) h2load -c "$CONNS" -m "$STREAMS" -t "$THREADS" \
        -D "$DURATION" "$SCHEME://127.0.0.1:$port/hello" >"$out.txt" 2>&1 || true
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
    echo "$rps $cpu" >>"$WORK/$name.h2load.rows"
}

# engine_run NAME PORT ROUND: the engine, --h2c or --h2, for DURATION s; every
# response verified (a failure stops the bench); appends "rps cpu_us_per_req"
# to NAME.engine.rows.
engine_run() {
    local name=$1 port=$2 round=$3 out="$WORK/$1.$3.engine"
    /usr/bin/time -f "%U %S" -o "$out.time" \
        timeout $((DURATION + 30)) "$HARNESS" run "${ENGINE_FLAGS[@]}" --streams "$STREAMS" -c "$CONNS" \
        --threads "$THREADS" --io "$IO" -d "${DURATION}s" --format json \
        "$SCHEME://127.0.0.1:$port/hello" >"$out.json" 2>"$out.err" || true
    local row
    row=$(python3 - "$out.json" "$out.time" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
user, sys_ = map(float, open(sys.argv[2]).read().split()[-2:])
ok, failed = d["requests"]["ok"], sum(d["failures"].values())
if ok == 0 or failed:
    sys.exit(f"ok {ok}, failed {failed}: {d['failures']}")
print(d["requests"]["ok_per_s"], (user + sys_) * 1e6 / ok)
PY
    ) || { echo "$name round $round: the engine failed: $(cat "$out.err")" >&2; exit 1; }
    echo "$row" >>"$WORK/$name.engine.rows"
}

for r in $(seq 1 "$ROUNDS"); do
    if [ $((r % 2)) = 1 ]; then order="nginx event-loop"; else order="event-loop nginx"; fi
    for s in $order; do
        case $s in
            nginx) port=$NGINX_PORT ;;
            event-loop) port=$EL_PORT ;;
        esac
        if [ $((r % 2)) = 1 ]; then
            one_run "$s" "$port" "$r"
            engine_run "$s" "$port" "$r"
        else
            engine_run "$s" "$port" "$r"
            one_run "$s" "$port" "$r"
        fi
    done
done

echo "h2load -c $CONNS -m $STREAMS -t $THREADS vs harness run ${ENGINE_FLAGS[0]} --streams $STREAMS -c $CONNS --threads $THREADS --io $IO, ${DURATION}s x $ROUNDS interleaved rounds, GET /hello over $PROTO; $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), WORKERS=$WORKERS"
python3 - "$WORK" <<'PY'
import statistics, sys
work = sys.argv[1]
def rows(name, client):
    return [tuple(map(float, l.split())) for l in open(f"{work}/{name}.{client}.rows")]
def span(xs, f):
    return f"{f(statistics.median(xs))} (range {f(min(xs))}-{f(max(xs))})"
for name in ("nginx", "event-loop"):
    h, e = rows(name, "h2load"), rows(name, "engine")
    for client, r in (("h2load", h), ("engine", e)):
        print(f"{name:<11} {client:<7} rps {span([x[0] for x in r], lambda v: f'{v:.0f}')},"
              f" CPU {span([x[1] for x in r], lambda v: f'{v:.2f}')} us/request")
    cpu = [b[1] / a[1] for a, b in zip(h, e)]
    rps = [b[0] / a[0] for a, b in zip(h, e)]
    print(f"{name:<11} engine / h2load: CPU per request {span(cpu, lambda v: f'{v:.2f}')}x,"
          f" RPS {span(rps, lambda v: f'{v:.2f}')}x")
PY

if [ "${HPACK:-1}" = 1 ]; then
    echo "HPACK decoder (engine::h2, release):"
    (cd "$ROOT" && cargo test --release -p harness --lib -- --ignored --nocapture hpack_timing 2>/dev/null | grep "^hpack:")
fi
