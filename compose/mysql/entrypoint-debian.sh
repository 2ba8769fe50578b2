#!/bin/sh
# Entrypoint of mysql/Dockerfile.debian (MariaDB), after the official mysql
# image's: the arguments are mariadbd options (`command:` in the compose
# files), and on the first start of a container the *.sql files of
# /docker-entrypoint-initdb.d (init.sql, mounted by docker-compose.yml) run as
# root on a server without networking; the real server starts only once they
# all succeeded, so no half-initialized database ever answers the healthcheck.
#
# One translation: init.sql says `IDENTIFIED WITH mysql_native_password BY`
# (MySQL 8.4 would otherwise use caching_sha2_password), which MariaDB does not
# parse; its `IDENTIFIED BY` is mysql_native_password already.
set -eu
log() { echo "bench-mariadb: $*" >&2; }

mkdir -p /run/mysqld
chown mysql:mysql /run/mysqld
if [ ! -d /var/lib/mysql/mysql ]; then
    mariadb-install-db --user=mysql --datadir=/var/lib/mysql --skip-test-db >/dev/null
fi

marker=/var/lib/mysql/.bench-initialized
if [ ! -e "$marker" ]; then
    sock=/run/mysqld/init.sock
    mariadbd --user=mysql --skip-networking --socket="$sock" --pid-file=/run/mysqld/init.pid &
    pid=$!
    i=0
    until mariadb-admin --socket="$sock" -uroot ping --silent >/dev/null 2>&1; do
        kill -0 "$pid" 2>/dev/null || { log "mariadbd exited during initialization"; exit 1; }
        i=$((i + 1))
        [ "$i" -le 120 ] || { log "mariadbd did not start in 60 s for initialization"; kill "$pid"; exit 1; }
        sleep 0.5
    done
    for f in /docker-entrypoint-initdb.d/*.sql; do
        [ -f "$f" ] || continue
        log "running $f"
        if ! sed 's/IDENTIFIED WITH mysql_native_password BY/IDENTIFIED BY/g' "$f" |
            mariadb --socket="$sock" -uroot; then
            log "$f failed: not starting the server"
            mariadb-admin --socket="$sock" -uroot shutdown || kill "$pid"
            wait "$pid" || true
            exit 1
        fi
    done
    mariadb-admin --socket="$sock" -uroot shutdown
    wait "$pid" || true
    touch "$marker"
    chown mysql:mysql "$marker"
    log "initialized"
fi
# The arguments are the compose files' `command:`, written for MySQL 8.4:
# --mysql-native-password=ON enables a plugin MariaDB has built in (and
# MariaDB refuses to start on an option it does not know), so it is dropped
# here, as init.sql's IDENTIFIED WITH is translated above.
for arg in "$@"; do
    shift
    case "$arg" in
        --mysql-native-password | --mysql-native-password=* | --mysql_native_password=*)
            log "dropping $arg (MySQL 8.4's; MariaDB has mysql_native_password built in)" ;;
        *) set -- "$@" "$arg" ;;
    esac
done
exec mariadbd --user=mysql "$@"
