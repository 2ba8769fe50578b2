# Shared by the bench scripts (sourced): a free port, waiting for a listener,
# and nginx `return 200 "Hello World"` as the load target whose cost is known.

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

wait_port() {
    for _ in $(seq 1 100); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.05
    done
    echo "nothing listens on port $1" >&2
    exit 1
}

# start_nginx_hello DIR PORT: nginx answering every path with 200 "Hello
# World", in the caller's session (daemon off: the same autogroup, so the
# same CPU share as the generator). Sets NGINX_PID; returns once it listens.
start_nginx_hello() {
    local dir=$1 port=$2
    mkdir -p "$dir/logs"
    cat >"$dir/nginx.conf" <<CONF
worker_processes auto;
worker_rlimit_nofile $(( $(ulimit -n) - 16 ));
daemon off;
pid $dir/nginx.pid;
error_log $dir/logs/error.log warn;
events { worker_connections 20000; }
http {
    access_log off;
    client_body_temp_path $dir/body;
    proxy_temp_path $dir/proxy;
    fastcgi_temp_path $dir/fastcgi;
    uwsgi_temp_path $dir/uwsgi;
    scgi_temp_path $dir/scgi;
    keepalive_requests 10000000;
    server {
        listen 127.0.0.1:$port reuseport backlog=4096;
        location / { return 200 "Hello World"; }
    }
}
CONF
    nginx -p "$dir" -c "$dir/nginx.conf" &
    NGINX_PID=$!
    wait_port "$port"
}

# --- The reference-server benches (engine-, tls-, pipeline-vs-wrk, ws-vs-k6) ---

# bench_init NAME: ROOT, TARGET_DIR and HARNESS (the release build); WORK,
# a folder of NAME's, removed at exit, when the reference server
# (SERVER_PID, once started) is stopped by its PID too.
bench_init() {
    ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
    TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
    HARNESS=$TARGET_DIR/release/harness
    WORK=$(mktemp -d "/tmp/$1.XXXXXX")
    SERVER_PID=
    trap bench_cleanup EXIT INT TERM
}

bench_cleanup() {
    if [ -n "$SERVER_PID" ]; then
        kill "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    rm -rf "$WORK"
}

# need CMD HOW: exits saying how to install CMD when it is not on PATH.
need() { command -v "$1" >/dev/null || { echo "missing $1: $2" >&2; exit 1; }; }

# need_time: GNU time, which reports a process's own CPU and peak RSS.
need_time() { [ -x /usr/bin/time ] || { echo "missing /usr/bin/time: apt-get install time" >&2; exit 1; }; }

# build_release PACKAGE...: the release binaries the bench runs.
build_release() {
    echo "== building (release)"
    # shellcheck disable=SC2046 # one -p per package
    (cd "$ROOT" && cargo build --release -q $(printf -- "-p %s " harness "$@"))
}

# start_ref_server [ARG...]: REF_SERVER (release build) on a free loopback
# port with SERVER_ARGS and ARGs → SERVER_PID and ADDR; exits with the
# server's output when it does not start.
start_ref_server() {
    local out=$WORK/server.out
    # shellcheck disable=SC2086 # SERVER_ARGS is a list of flags
    "$TARGET_DIR/release/$REF_SERVER" --addr 127.0.0.1:0 $SERVER_ARGS "$@" >"$out" 2>&1 &
    SERVER_PID=$!
    for _ in $(seq 1 100); do
        # The server's redirect may not exist yet: not an error (set -e).
        ADDR=$(sed -n 's/^listening on //p' "$out" 2>/dev/null || true)
        [ -n "$ADDR" ] && return 0
        sleep 0.05
    done
    echo "$REF_SERVER did not start:" >&2
    cat "$out" >&2
    exit 1
}

# server_ticks: the reference server's user + system time so far, in clock
# ticks (/proc/PID/stat fields 14 and 15; CLK_TCK a second).
CLK_TCK=$(getconf CLK_TCK)
server_ticks() { awk '{print $14 + $15}' "/proc/$SERVER_PID/stat"; }

# timed OUT CMD...: CMD under /usr/bin/time, bounded by DURATION + 60 s:
# its stdout in OUT.out, stderr in OUT.err, "user sys maxrss_kib elapsed"
# in OUT.time. A failing CMD is the caller's to judge from its output.
timed() {
    local o=$1
    shift
    /usr/bin/time -f '%U %S %M %e' -o "$o.time" timeout $((DURATION + 60)) "$@" >"$o.out" 2>"$o.err" || true
}

# cpu_of OUT: the user + system seconds `timed` recorded.
cpu_of() { awk '{print $1 + $2}' "$1.time"; }

# engine_ok OUT TOOL C: the verified responses of the engine's JSON report
# in OUT.out (empty when there is none); says how many failed, if any did.
engine_ok() {
    local failed
    failed=$(jq '.requests.failed' "$1.out" 2>/dev/null || echo '?')
    [ "$failed" = 0 ] || echo "   ($2 -c $3: $failed failed)" >&2
    jq '.requests.ok' "$1.out" 2>/dev/null || true
}

# record TOOL C ROUND N OUT TICKS0: one run's line in $RESULTS (tool, c,
# round, requests, seconds, the generator's CPU s from OUT.time, the
# server's CPU s since TICKS0), or why there is none.
record() {
    local tool=$1 c=$2 round=$3 n=$4 o=$5 ticks0=$6 server_cpu
    if [ -z "$n" ] || [ "$n" = null ]; then
        echo "   $tool -c $c round $round: no result ($(tail -1 "$o.err"))"
        return
    fi
    server_cpu=$(awk -v a="$ticks0" -v b="$(server_ticks)" -v hz="$CLK_TCK" 'BEGIN {print (b - a) / hz}')
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$tool" "$c" "$round" "$n" "$DURATION" \
        "$(cpu_of "$o")" "$server_cpu" >>"$RESULTS"
}

# interleaved_rounds TOOL...: the script's `one TOOL C ROUND` for each tool
# and each c of $CONNS, $ROUNDS times, the tools' order turned each round
# so that none always runs first (or after the same one).
interleaved_rounds() {
    local round c tool
    for round in $(seq 1 "$ROUNDS"); do
        for c in $CONNS; do
            for tool in $(printf '%s\n' "$@" |
                awk -v r="$round" '{a[NR]=$0} END {for (i = 0; i < NR; i++) print a[(i + r) % NR + 1]}'); do
                one "$tool" "$c" "$round"
            done
        done
        echo "   round $round done ($(uptime | sed 's/.*load/load/'))"
    done
}

# summarize ANCHOR TOOL...: per c, from $RESULTS, each tool's medians over
# the rounds (requests per second, the generator's CPU µs per request, the
# server's CPU µs per request), and beside the others' their RPS and CPU per
# request as ratios to ANCHOR's in the same round, with the range of the
# rounds' ratios.
summarize() {
    python3 - "$RESULTS" "$@" <<'PY'
import sys, statistics as st
anchor, tools = sys.argv[2], sys.argv[2:]
rows = [l.split("\t") for l in open(sys.argv[1]) if l.strip()]
cells = {}
for tool, c, rnd, n, secs, cpu, server_cpu in rows:
    n, secs, cpu, server_cpu = int(float(n)), float(secs), float(cpu), float(server_cpu)
    cells.setdefault((tool, int(c)), {})[rnd] = (n / secs, cpu * 1e6 / max(n, 1), server_cpu * 1e6 / max(n, 1))
def spread(xs):
    return f"({min(xs):.2f}–{max(xs):.2f})" if len(xs) > 1 else ""
for c in sorted({c for _, c in cells}):
    base = cells.get((anchor, c), {})
    print(f"   -c {c}")
    for tool in tools:
        v = cells.get((tool, c))
        if not v:
            continue
        rps = st.median(x[0] for x in v.values())
        us = st.median(x[1] for x in v.values())
        server_us = st.median(x[2] for x in v.values())
        same = [r for r in v if r in base]
        rps_r = [v[r][0] / base[r][0] for r in same]
        us_r = [v[r][1] / base[r][1] for r in same]
        ratio = "" if tool == anchor or not same else (
            f"RPS {st.median(rps_r):>5.2f}× {anchor} {spread(rps_r):<11}  "
            f"CPU/req {st.median(us_r):>5.2f}× {anchor} {spread(us_r):<11}  ")
        print(f"     {tool:<6} {rps:>10,.0f} req/s  {us:>8.3f} µs CPU/req   {ratio}"
              f"server {server_us:>7.2f} µs/req   ({len(v)} rounds)")
PY
}
