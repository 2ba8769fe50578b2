# Sourced by the benches: `start_private_mariadb DIR` starts a MariaDB of
# its own in DIR on a free 127.0.0.1 port, with the database and user the
# reference servers expect, and sets DB_PID, DBPORT and URL (the servers'
# --mysql-url). The caller stops DB_PID at exit.
start_private_mariadb() {
  local dir=$1 root_user=()
  [ "$(id -u)" = 0 ] && root_user=(--user=root)
  DBPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  mariadb-install-db --no-defaults --datadir="$dir/db" --auth-root-authentication-method=socket --skip-test-db "${root_user[@]}" >/dev/null
  # An --init-file takes one statement per line.
  cat >"$dir/init.sql" <<SQL
CREATE DATABASE IF NOT EXISTS bench;
CREATE USER IF NOT EXISTS 'bench'@'%' IDENTIFIED BY 'bench';
CREATE USER IF NOT EXISTS 'bench'@'localhost' IDENTIFIED BY 'bench';
GRANT ALL ON bench.* TO 'bench'@'%';
GRANT ALL ON bench.* TO 'bench'@'localhost';
SQL
  /usr/sbin/mariadbd --no-defaults --datadir="$dir/db" --socket="$dir/db.sock" --port="$DBPORT" \
    --bind-address=127.0.0.1 --init-file="$dir/init.sql" --skip-name-resolve --max-connections=1000 \
    "${root_user[@]}" >"$dir/mariadbd.log" 2>&1 &
  DB_PID=$!
  for _ in $(seq 1 200); do (exec 3<>"/dev/tcp/127.0.0.1/$DBPORT") 2>/dev/null && break; sleep 0.1; done
  URL="mysql://bench:bench@127.0.0.1:$DBPORT/bench"
}
