#!/usr/bin/env bash
# nginx + php-fpm for the benchmark, from the templates beside this script.
#
#   run-local.sh start  <workdir> <http_port>  render into <workdir>, start php-fpm
#                                              and nginx in the background (PIDs in
#                                              <workdir>/php-fpm.pid, nginx.pid), wait
#                                              until GET /config answers as php-fpm, exit 0
#   run-local.sh stop   <workdir>              stop both by those PIDs and wait
#   run-local.sh render <workdir> <listen>     only render the templates
#   run-local.sh run    <workdir> <listen>     render, run both in the foreground until
#                                              one exits or SIGTERM (the Docker CMD)
#   run-local.sh check  <workdir>              render and syntax-check both configs
#                                              (nginx -t, php-fpm -t)
#
# <listen> is a port (bound on 127.0.0.1) or ADDR:PORT. Environment overrides:
#   BENCH_USER, BENCH_GROUP  pool/worker user (default: the current user)
#   PHP_FPM, NGINX           binaries (default: php-fpm8.2 or php-fpm; nginx)
#   PHP_INI                  default: compose/php/php.ini
#   APP_DIR                  directory of index.php (default: this directory)
#   DB_HOST DB_PORT DB_USER DB_PASSWORD DB_NAME   passed through to PHP
#
# Placeholders in php-fpm.conf / nginx.conf: @PREFIX@ @LISTEN@ @APP_DIR@ @USER@ @GROUP@.
#
# Scheduling: php-fpm calls setsid() even with --nodaemonize; started as a
# process-group leader (bash job control, `set -m`) that call fails and it
# stays in the caller's session, hence in the caller's scheduler autogroup.
# nginx runs with `daemon off;` for the same reason. Do not wrap either in
# setsid(1). See docs/ARCHITECTURE.md §5 (the autogroup).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
COMPOSE_DIR=$(dirname "$HERE")

die() { echo "run-local.sh: $*" >&2; exit 1; }

find_bin() { # name...: first one found on PATH or in the sbin dirs
    local n d
    for n in "$@"; do
        if command -v "$n" >/dev/null 2>&1; then command -v "$n"; return 0; fi
        for d in /usr/sbin /usr/local/sbin /sbin; do
            [ -x "$d/$n" ] && { echo "$d/$n"; return 0; }
        done
    done
    return 1
}

PHP_FPM=${PHP_FPM:-$(find_bin php-fpm8.2 php-fpm || true)}
NGINX=${NGINX:-$(find_bin nginx || true)}
PHP_INI=${PHP_INI:-$COMPOSE_DIR/php/php.ini}
APP_DIR=${APP_DIR:-$HERE}
BENCH_USER=${BENCH_USER:-$(id -un)}
BENCH_GROUP=${BENCH_GROUP:-$(id -gn)}

listen_addr() { # 18080 -> 127.0.0.1:18080; ADDR:PORT unchanged
    case "$1" in
        *:*) echo "$1" ;;
        ''|*[!0-9]*) die "bad listen address: $1" ;;
        *) echo "127.0.0.1:$1" ;;
    esac
}

render() { # workdir listen
    local wd=$1 listen=$2 f
    mkdir -p "$wd/tmp"
    for f in php-fpm.conf nginx.conf; do
        sed -e "s|@PREFIX@|$wd|g" -e "s|@LISTEN@|$listen|g" -e "s|@APP_DIR@|$APP_DIR|g" \
            -e "s|@USER@|$BENCH_USER|g" -e "s|@GROUP@|$BENCH_GROUP|g" \
            "$HERE/$f" >"$wd/$f"
        if grep -q '@[A-Z_]*@' "$wd/$f"; then die "unrendered placeholder in $wd/$f"; fi
    done
}

fpm_cmd() { # workdir -> the php-fpm command line, one word per line
    local wd=$1
    printf '%s\n' "$PHP_FPM" --nodaemonize --fpm-config "$wd/php-fpm.conf" -c "$PHP_INI" \
        -d opcache.jit=tracing -d opcache.jit_buffer_size=128M
    # php-fpm refuses root workers unless told so
    if [ "$(id -u)" = 0 ] && [ "$BENCH_USER" = root ]; then echo -R; fi
}

nginx_cmd() {
    local wd=$1
    printf '%s\n' "$NGINX" -p "$wd" -e "$wd/nginx-error.log" -c "$wd/nginx.conf"
}

check_bins() {
    [ -n "$PHP_FPM" ] && [ -x "$PHP_FPM" ] || die "php-fpm not found (apt-get install php8.2-fpm php8.2-mysql, or set PHP_FPM)"
    [ -n "$NGINX" ] && [ -x "$NGINX" ] || die "nginx not found (apt-get install nginx-light, or set NGINX)"
    [ -r "$PHP_INI" ] || die "php.ini not found: $PHP_INI"
}

alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }

# Is the server on host:port ours? GET /config must name php-fpm (a bare
# GET /hello would also be answered by whatever else holds the port).
probe() { # host port
    local host=$1 port=$2 reply
    if command -v curl >/dev/null 2>&1; then
        reply=$(curl -s --max-time 2 "http://$host:$port/config" 2>/dev/null) || return 1
    else
        reply=$(timeout 2 bash -c 'exec 3<>"/dev/tcp/$0/$1" || exit 1
            printf "GET /config HTTP/1.0\r\nHost: %s\r\n\r\n" "$0" >&3; cat <&3' "$host" "$port" 2>/dev/null) || return 1
    fi
    case "$reply" in *'"server":"php-fpm"'*) return 0 ;; *) return 1 ;; esac
}

# Does anything accept connections on host:port?
port_busy() { # host port
    timeout 1 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$1" "$2" 2>/dev/null
}

show_logs() {
    local wd=$1 f
    for f in php-fpm.log php-fpm.out nginx-error.log nginx.out; do
        [ -s "$wd/$f" ] && { echo "--- $wd/$f" >&2; tail -n 20 "$wd/$f" >&2; }
    done
    return 0
}

# stop_pid pidfile expected-name: TERM, wait up to 10 s, then KILL
stop_pid() {
    local pidfile=$1 name=$2 pid i
    [ -s "$pidfile" ] || return 0
    pid=$(cat "$pidfile")
    # guard against a recycled PID
    if alive "$pid" && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "$name"; then
        kill -TERM "$pid" 2>/dev/null || true
        for i in $(seq 100); do alive "$pid" || break; sleep 0.1; done
        if alive "$pid"; then
            echo "run-local.sh: $name ($pid) ignored SIGTERM, killing" >&2
            kill -KILL "$pid" 2>/dev/null || true
            for i in $(seq 50); do alive "$pid" || break; sleep 0.1; done
        fi
    fi
    rm -f "$pidfile"
}

cmd_stop() {
    local wd=$1
    stop_pid "$wd/nginx.pid" nginx
    stop_pid "$wd/php-fpm.pid" php-fpm
    rm -f "$wd/php-fpm.sock"
}

cmd_start() {
    local wd port listen fpm_pid nginx_pid i host
    [ $# -eq 2 ] || die "usage: run-local.sh start <workdir> <http_port>"
    mkdir -p "$1"
    wd=$(cd "$1" && pwd)
    port=$2
    case "$port" in ''|*[!0-9]*) die "http_port must be a number: $port" ;; esac
    listen=$(listen_addr "$port")
    host=${listen%:*}
    check_bins
    if alive "$(cat "$wd/nginx.pid" 2>/dev/null)" || alive "$(cat "$wd/php-fpm.pid" 2>/dev/null)"; then
        die "already running in $wd (run-local.sh stop $wd)"
    fi
    if port_busy "$host" "$port"; then die "port $port on $host is already in use"; fi
    render "$wd" "$listen"
    rm -f "$wd/php-fpm.sock"

    # Job control: each background job is its own process group (see top).
    set -m
    mapfile -t fpm < <(fpm_cmd "$wd")
    "${fpm[@]}" </dev/null >>"$wd/php-fpm.out" 2>&1 &
    fpm_pid=$!
    echo "$fpm_pid" >"$wd/php-fpm.pid"
    for i in $(seq 100); do
        [ -S "$wd/php-fpm.sock" ] && break
        alive "$fpm_pid" || { show_logs "$wd"; die "php-fpm exited during startup"; }
        sleep 0.1
    done
    [ -S "$wd/php-fpm.sock" ] || { show_logs "$wd"; cmd_stop "$wd"; die "php-fpm socket did not appear"; }

    mapfile -t ngx < <(nginx_cmd "$wd")
    "${ngx[@]}" </dev/null >>"$wd/nginx.out" 2>&1 &
    nginx_pid=$!
    echo "$nginx_pid" >"$wd/nginx.pid.start"
    set +m

    for i in $(seq 150); do
        if probe "$host" "$port"; then
            # nginx writes nginx.pid itself; keep ours if it has not yet
            [ -s "$wd/nginx.pid" ] || echo "$nginx_pid" >"$wd/nginx.pid"
            rm -f "$wd/nginx.pid.start"
            echo "php-fpm $fpm_pid, nginx $nginx_pid: http://$listen"
            return 0
        fi
        if ! alive "$fpm_pid" || ! alive "$nginx_pid"; then break; fi
        sleep 0.1
    done
    show_logs "$wd"
    echo "$nginx_pid" >"$wd/nginx.pid"
    rm -f "$wd/nginx.pid.start"
    cmd_stop "$wd"
    die "php-fpm did not answer GET /config on $listen"
}

# Foreground for containers: both processes are children of this shell;
# SIGTERM/SIGINT stop both; if either exits, the other is stopped too and the
# container exits (restart: unless-stopped brings it back).
cmd_run() {
    local wd listen fpm_pid nginx_pid rc=0
    [ $# -eq 2 ] || die "usage: run-local.sh run <workdir> <listen>"
    mkdir -p "$1"
    wd=$(cd "$1" && pwd)
    listen=$(listen_addr "$2")
    check_bins
    render "$wd" "$listen"
    rm -f "$wd/php-fpm.sock"
    mapfile -t fpm < <(fpm_cmd "$wd")
    mapfile -t ngx < <(nginx_cmd "$wd")
    "${fpm[@]}" </dev/null &
    fpm_pid=$!
    for _ in $(seq 100); do [ -S "$wd/php-fpm.sock" ] && break; sleep 0.1; done
    "${ngx[@]}" </dev/null &
    nginx_pid=$!
    trap 'kill -TERM $nginx_pid $fpm_pid 2>/dev/null || true' TERM INT
    wait -n "$fpm_pid" "$nginx_pid" || rc=$?
    kill -TERM "$nginx_pid" "$fpm_pid" 2>/dev/null || true
    wait "$nginx_pid" "$fpm_pid" 2>/dev/null || true
    exit "$rc"
}

cmd_check() {
    local wd
    [ $# -eq 1 ] || die "usage: run-local.sh check <workdir>"
    mkdir -p "$1"
    wd=$(cd "$1" && pwd)
    check_bins
    render "$wd" 127.0.0.1:1
    mapfile -t fpm < <(fpm_cmd "$wd")
    mapfile -t ngx < <(nginx_cmd "$wd")
    if ! "${fpm[@]}" -t 2>&1 | sed 's/^/php-fpm: /'; then die "php-fpm -t failed"; fi
    if ! "${ngx[@]}" -t 2>&1 | sed -e '/the "user" directive makes sense only/d' -e 's/^/nginx: /'; then
        die "nginx -t failed"
    fi
}

case "${1:-}" in
    start) shift; cmd_start "$@" ;;
    check) shift; cmd_check "$@" ;;
    stop)
        [ $# -eq 2 ] || die "usage: run-local.sh stop <workdir>"
        [ -d "$2" ] || exit 0
        cmd_stop "$(cd "$2" && pwd)" ;;
    render)
        [ $# -eq 3 ] || die "usage: run-local.sh render <workdir> <listen>"
        mkdir -p "$2"
        render "$(cd "$2" && pwd)" "$(listen_addr "$3")" ;;
    run) shift; cmd_run "$@" ;;
    *) sed -n '2,26p' "$0" >&2; exit 2 ;;
esac
