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
        ADDR=$(sed -n 's/^listening on //p' "$out")
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
