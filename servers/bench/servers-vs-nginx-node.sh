#!/usr/bin/env bash
# Benchmark of the reference servers, side by side in one run (issue 2):
# wrk -t2 and -t1 -c100 -d10s on /hello and /work of each Rust server next to
# nginx `return 200 "Hello World"`, a Node.js `http` hello world, the
# compose/node app (mysql2 pool 20) and nginx + php-fpm (20 static workers,
# OPcache + tracing JIT, persistent PDO); then ApacheBench -c 100 -n 20000,
# with and without -k, on /hello and /work of each Rust server.
# Prints RPS and ratios to nginx and Node.js. Everything runs on 127.0.0.1 and
# is stopped by PID at exit.
#
#   servers/bench/servers-vs-nginx-node.sh [DURATION]     # default 10s
set -euo pipefail
cd "$(dirname "$0")/../.."
DURATION=${1:-10s}
ROOT=$PWD
WORK=$(mktemp -d /tmp/bench-servers.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  [ -f "$WORK/fpm/php-fpm.pid" ] && compose/php-fpm/run-local.sh stop "$WORK/fpm" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

for tool in wrk ab node nginx mariadbd mariadb-install-db; do
  command -v "$tool" >/dev/null || [ -x "/usr/sbin/$tool" ] || { echo "missing $tool: run scripts/install-deps" >&2; exit 1; }
done
cargo build --release --locked -q -p event-loop -p coroutine -p worker-pool

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_http() { for _ in $(seq 1 200); do curl -sf "http://127.0.0.1:$1/hello" >/dev/null && return 0; sleep 0.05; done; echo "port $1 never answered" >&2; return 1; }

# A private MariaDB.
. servers/bench/private-mariadb.sh
start_private_mariadb "$WORK"
PIDS+=("$DB_PID")

declare -A PORT
start_rust() { # name bin args...
  local name=$1 bin=$2; shift 2
  "target/release/$bin" --addr 127.0.0.1:0 --mysql-url "$URL" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" &
  PIDS+=($!)
  for _ in $(seq 1 100); do grep -q "listening on" "$WORK/$name.out" 2>/dev/null && break; sleep 0.05; done
  PORT[$name]=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$WORK/$name.out")
}
start_rust event-loop event-loop
start_rust event-loop-x2 event-loop --workers 2
start_rust coroutine coroutine
start_rust worker-pool worker-pool --workers 20

# nginx return 200 (daemon off: stays in our scheduler autogroup).
PORT[nginx]=$(free_port)
mkdir -p "$WORK/nginx/logs"
cat >"$WORK/nginx/nginx.conf" <<NGX
daemon off; worker_processes auto; pid $WORK/nginx/nginx.pid; error_log $WORK/nginx/error.log;
events { worker_connections 4096; }
http { access_log off; keepalive_requests 1000000;
  server { listen 127.0.0.1:${PORT[nginx]} reuseport backlog=4096;
    location / { default_type text/plain; return 200 "Hello World"; } } }
NGX
nginx -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" -e "$WORK/nginx/error.log" &
PIDS+=($!)

# Node.js: a bare http hello world, and the compose app (mysql2 pool of 20).
PORT[node-hello]=$(free_port)
cat >"$WORK/hello.js" <<'JS'
const http = require('http');
http.createServer((req, res) => { res.writeHead(200, {'Content-Type': 'text/plain', 'Content-Length': 11}); res.end('Hello World'); })
  .listen(+process.env.PORT, '127.0.0.1');
JS
PORT="${PORT[node-hello]}" node "$WORK/hello.js" &
PIDS+=($!)
if [ -d compose/node/node_modules ]; then
  PORT[node]=$(free_port)
  HOST=127.0.0.1 PORT="${PORT[node]}" DB_HOST=127.0.0.1 DB_PORT="$DBPORT" node compose/node/server.js >"$WORK/node.out" 2>&1 &
  PIDS+=($!)
fi
# nginx + php-fpm from compose/php-fpm (20 static workers, OPcache + JIT).
PORT[php-fpm]=$(free_port)
DB_HOST=127.0.0.1 DB_PORT="$DBPORT" compose/php-fpm/run-local.sh start "$WORK/fpm" "${PORT[php-fpm]}" >/dev/null

for s in "${!PORT[@]}"; do wait_http "${PORT[$s]}"; done

rps() { sed -n 's/^Requests\/sec: *\([0-9.]*\).*/\1/p'; }
declare -A R
run_wrk() { # key threads port path
  local out; out=$(wrk -t"$2" -c100 -d"$DURATION" "http://127.0.0.1:$3$4")
  if grep -q "Non-2xx\|Socket errors" <<<"$out"; then echo "WARNING $1: $(grep -E 'Non-2xx|Socket errors' <<<"$out")" >&2; fi
  R[$1]=$(rps <<<"$out"); printf '%-34s %10.0f\n' "$1" "${R[$1]}"
}

echo "== wrk -c100 -d$DURATION (RPS)"
for t in 2 1; do
  for s in nginx node-hello event-loop event-loop-x2 coroutine worker-pool node php-fpm; do
    [ -n "${PORT[$s]:-}" ] || continue
    run_wrk "$s /hello -t$t" "$t" "${PORT[$s]}" /hello
  done
  for s in event-loop event-loop-x2 coroutine worker-pool node php-fpm; do
    [ -n "${PORT[$s]:-}" ] || continue
    run_wrk "$s /work -t$t" "$t" "${PORT[$s]}" /work
  done
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
echo
echo "== ratios (-t2)"
for s in event-loop event-loop-x2 coroutine worker-pool; do
  printf '%-16s /hello: %s x nginx, %s x node-hello    /work: %s x node, %s x php-fpm\n' "$s" \
    "$(ratio "${R[$s /hello -t2]}" "${R[nginx /hello -t2]}")" "$(ratio "${R[$s /hello -t2]}" "${R[node-hello /hello -t2]}")" \
    "$(ratio "${R[$s /work -t2]}" "${R[node /work -t2]:-0}")" "$(ratio "${R[$s /work -t2]}" "${R[php-fpm /work -t2]:-0}")"
done

echo
echo "== ab -c 100 -n 20000"
for s in event-loop coroutine worker-pool; do
  for path in /hello /work; do
    for k in "" "-k"; do
      out=$(ab -q -c 100 -n 20000 $k "http://127.0.0.1:${PORT[$s]}$path" 2>&1)
      printf '%-12s %-6s %-3s  %8s req/s  failed %s  keep-alive %s\n' "$s" "$path" "$k" \
        "$(sed -n 's/^Requests per second: *\([0-9.]*\).*/\1/p' <<<"$out")" \
        "$(sed -n 's/^Failed requests: *\([0-9]*\).*/\1/p' <<<"$out")" \
        "$(sed -n 's/^Keep-Alive requests: *\([0-9]*\).*/\1/p' <<<"$out")"
    done
  done
done
