#!/usr/bin/env bash
# harness run vs wrk (Debian's) vs ab -k, against the same servers, same -c,
# same duration: requests per second and each generator's own CPU time per
# request (/usr/bin/time), printed as ratios to wrk. Then 10,000 connections
# held open against one server: the generator's peak RSS.
#
# One run of each, on purpose: the ratios are read side by side, not
# averaged. On 2 shared cores, run it on a quiet machine.
#
#   harness/bench/engine-vs-wrk.sh                 # nginx return 200 + the fastest reference server
#   DURATION=5 CONNS=100 REF_SERVER=coroutine harness/bench/engine-vs-wrk.sh
#
# Environment: DURATION (s, default 10), CONNS (default 100), WRK_THREADS
# (default 2), REF_SERVER (event-loop|coroutine|worker-pool|none; default:
# the fastest on a 2 s probe), BENCH_MYSQL_URL, HOLD_CONNS (default 10000).
# Everything it starts is stopped by PID on exit.
set -euo pipefail

DURATION=${DURATION:-10}
CONNS=${CONNS:-100}
WRK_THREADS=${WRK_THREADS:-2}
HOLD_CONNS=${HOLD_CONNS:-10000}
MYSQL_URL=${BENCH_MYSQL_URL:-mysql://bench:bench@127.0.0.1:3306/bench}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d /tmp/engine-vs-wrk.XXXXXX)
PIDS=()

cleanup() {
    for pid in "${PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

need() { command -v "$1" >/dev/null || { echo "missing $1: $2" >&2; exit 1; }; }
need wrk "apt-get install wrk"
need ab "apt-get install apache2-utils"
need nginx "apt-get install nginx"
need jq "apt-get install jq"
need python3 "apt-get install python3"
[ -x /usr/bin/time ] || { echo "missing /usr/bin/time: apt-get install time" >&2; exit 1; }

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

echo "== building (release)"
(cd "$ROOT" && cargo build --release -p harness)
HARNESS=$ROOT/target/release/harness

# nginx `return 200`, in the harness's session (daemon off; autogroup trap).
NGINX_PORT=$(free_port)
start_nginx_hello "$WORK/nginx" "$NGINX_PORT"
PIDS+=("$NGINX_PID")

start_ref() { # name → sets REF_ADDR, appends its PID
    local bin=$ROOT/target/release/$1 out=$WORK/$1.out
    : >"$out"
    "$bin" --addr 127.0.0.1:0 --mysql-url "$MYSQL_URL" >"$out" 2>&1 &
    PIDS+=($!)
    for _ in $(seq 1 100); do
        REF_ADDR=$(sed -n 's/^listening on //p' "$out")
        [ -n "$REF_ADDR" ] && return 0
        sleep 0.05
    done
    echo "$1 did not start:" >&2
    cat "$out" >&2
    exit 1
}

stop_last() {
    local pid=${PIDS[-1]}
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    unset 'PIDS[-1]'
}

REF_SERVER=${REF_SERVER:-}
if [ -z "$REF_SERVER" ]; then
    echo "== probing the reference servers' /hello (2 s each)"
    best=0
    for s in event-loop coroutine worker-pool; do
        (cd "$ROOT" && cargo build --release -p "$s" -q) || continue
        start_ref "$s"
        rps=$("$HARNESS" run "http://$REF_ADDR/hello" -c "$CONNS" -d 2s --format json | jq '.requests.ok_per_s')
        stop_last
        printf '   %-12s %10.0f req/s\n' "$s" "$rps"
        if python3 -c "import sys; sys.exit(0 if $rps > $best else 1)"; then
            best=$rps
            REF_SERVER=$s
        fi
    done
elif [ "$REF_SERVER" != none ]; then
    (cd "$ROOT" && cargo build --release -p "$REF_SERVER" -q)
fi

# time_cpu FILE → "user+sys seconds" and "peak RSS KiB" from /usr/bin/time -o FILE.
cpu_of() { awk '{print $1 + $2}' "$1"; }
rss_of() { awk '{print $3}' "$1"; }

# row LABEL REQUESTS RPS CPU_S → prints one line, remembers wrk's figures.
row() {
    local label=$1 n=$2 rps=$3 cpu=$4
    local us_per_req
    us_per_req=$(python3 -c "print(f'{$cpu * 1e6 / max($n, 1):.2f}')")
    if [ "$label" = wrk ]; then
        WRK_RPS=$rps
        WRK_US=$us_per_req
    fi
    python3 - "$label" "$n" "$rps" "$us_per_req" "$WRK_RPS" "$WRK_US" <<'PY'
import sys
label, n, rps, us, wrps, wus = sys.argv[1], int(float(sys.argv[2])), float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6])
print(f"   {label:<17} {n:>11,} req  {rps:>10,.0f} req/s  {us:>6.2f} µs CPU/req   "
      f"RPS {rps / wrps:>5.2f}× wrk   CPU/req {us / wus:>5.2f}× wrk")
PY
}

compare() { # NAME URL
    local name=$1 url=$2 t=$WORK/time
    echo "== $name: $url, -c $CONNS, ${DURATION}s"
    # wrk first: the others are read as ratios to it.
    WRK_RPS=1 WRK_US=1
    /usr/bin/time -f '%U %S %M' -o "$t" wrk -t"$WRK_THREADS" -c"$CONNS" -d"${DURATION}s" "$url" >"$WORK/wrk.out"
    local n rps
    n=$(awk '/requests in/ {print $1}' "$WORK/wrk.out")
    rps=$(awk '/Requests\/sec/ {print $2}' "$WORK/wrk.out")
    row wrk "$n" "$rps" "$(cpu_of "$t")"

    /usr/bin/time -f '%U %S %M' -o "$t" "$HARNESS" run "$url" -c "$CONNS" -d "${DURATION}s" --format json >"$WORK/harness.json"
    n=$(jq '.requests.total' "$WORK/harness.json")
    rps=$(jq '.requests.per_s' "$WORK/harness.json")
    row "harness run" "$n" "$rps" "$(cpu_of "$t")"
    local failed
    failed=$(jq '.requests.failed' "$WORK/harness.json")
    [ "$failed" = 0 ] || echo "   (harness counted $failed failed requests: $(jq -c .failures "$WORK/harness.json"))"

    # One engine thread: on 2 shared cores, fewer sleeps and wake-ups per request.
    /usr/bin/time -f '%U %S %M' -o "$t" "$HARNESS" run "$url" -c "$CONNS" -d "${DURATION}s" --threads 1 --format json >"$WORK/harness1.json"
    row "harness -threads1" "$(jq '.requests.total' "$WORK/harness1.json")" \
        "$(jq '.requests.per_s' "$WORK/harness1.json")" "$(cpu_of "$t")"

    /usr/bin/time -f '%U %S %M' -o "$t" ab -k -q -c "$CONNS" -t "$DURATION" -n 100000000 "$url" >"$WORK/ab.out" 2>&1 || true
    n=$(awk '/^Complete requests:/ {print $3}' "$WORK/ab.out")
    rps=$(awk '/^Requests per second:/ {print $4}' "$WORK/ab.out")
    if [ -n "$n" ]; then
        row "ab -k" "$n" "$rps" "$(cpu_of "$t")"
    else
        echo "   ab -k failed: $(tail -2 "$WORK/ab.out")"
    fi

    if command -v oha >/dev/null; then
        /usr/bin/time -f '%U %S %M' -o "$t" oha -z "${DURATION}s" -c "$CONNS" --no-tui "$url" >"$WORK/oha.out" 2>&1 || true
        rps=$(awk '/Requests\/sec:/ {print $2}' "$WORK/oha.out")
        if [ -n "$rps" ]; then
            row "oha" "$(python3 -c "print(round($rps * $DURATION))")" "$rps" "$(cpu_of "$t")"
        fi
    fi
}

# A connection per request: harness --no-keepalive vs ab without -k (its default).
compare_close() { # NAME URL
    local name=$1 url=$2 t=$WORK/time d=$(( DURATION < 5 ? DURATION : 5 ))
    echo "== $name, a connection per request: $url, -c $CONNS, ${d}s"
    /usr/bin/time -f '%U %S %M' -o "$t" ab -q -c "$CONNS" -t "$d" -n 100000000 "$url" >"$WORK/ab.out" 2>&1 || true
    local n rps
    n=$(awk '/^Complete requests:/ {print $3}' "$WORK/ab.out")
    rps=$(awk '/^Requests per second:/ {print $4}' "$WORK/ab.out")
    WRK_RPS=$rps
    WRK_US=$(python3 -c "print($(cpu_of "$t") * 1e6 / max($n, 1))")
    python3 -c "print(f'   {\"ab\":<17} {$n:>11,} req  {$rps:>10,.0f} req/s  {$WRK_US:>6.2f} µs CPU/req   (the reference of this section)')"
    /usr/bin/time -f '%U %S %M' -o "$t" "$HARNESS" run "$url" -c "$CONNS" -d "${d}s" --no-keepalive --format json >"$WORK/harness.json"
    n=$(jq '.requests.total' "$WORK/harness.json")
    rps=$(jq '.requests.per_s' "$WORK/harness.json")
    row "harness -no-ka" "$n" "$rps" "$(cpu_of "$t")" | sed 's/× wrk/× ab/g'
}

compare "nginx return 200" "http://127.0.0.1:$NGINX_PORT/hello"
compare_close "nginx return 200" "http://127.0.0.1:$NGINX_PORT/hello"
if [ -n "$REF_SERVER" ] && [ "$REF_SERVER" != none ]; then
    start_ref "$REF_SERVER"
    compare "$REF_SERVER (reference server)" "http://$REF_ADDR/hello"
    stop_last
fi

echo "== $HOLD_CONNS connections held open against nginx (closed loop, 10 s): peak RSS"
t=$WORK/time
/usr/bin/time -f '%U %S %M' -o "$t" "$HARNESS" run "http://127.0.0.1:$NGINX_PORT/hello" \
    -c "$HOLD_CONNS" -d 10s --timeout 30s --format json >"$WORK/hold.json"
printf '   harness run    %6.1f MiB peak RSS   (%s connections opened, %s ok, %s failed)\n' \
    "$(python3 -c "print($(rss_of "$t") / 1024)")" \
    "$(jq .connections.opened "$WORK/hold.json")" "$(jq .requests.ok "$WORK/hold.json")" \
    "$(jq .requests.failed "$WORK/hold.json")"
/usr/bin/time -f '%U %S %M' -o "$t" wrk -t"$WRK_THREADS" -c"$HOLD_CONNS" -d5s \
    "http://127.0.0.1:$NGINX_PORT/hello" >"$WORK/wrk-hold.out" 2>&1 || true
printf '   wrk            %6.1f MiB peak RSS   (for reference)\n' \
    "$(python3 -c "print($(rss_of "$t") / 1024)")"
