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
