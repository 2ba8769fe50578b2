#!/usr/bin/env bash
# The compose stacks on a real Docker engine (called by compose/check.sh).
# Every stack whose image can be built here — mysql (MariaDB), php-fpm +
# nginx, node, rust-event-loop, rust-coroutine, rust-worker-pool — is built
# on the lab's base (debian-compose.sh, docker-compose.debian.yml: no Docker
# Hub needed), then, for the bridge file and again for the host + cpuset file:
#   up; every container healthy; the database configured as my.cnf says and
#   bench/bench logging in; `harness verify` (every contract row) through each
#   stack's port; a short `harness compare --target ...` of them all, every
#   cell measured with 0 failed requests; down -v; and nothing of the project
#   left (containers, networks, volumes).
# RoadRunner, FrankenPHP and Swoole are listed as "not built: <reason>",
# never counted.
#
# Needs: a Docker engine, docker-compose (or docker compose), python3 +
# PyYAML, cargo (the release binaries: servers and harness), and root +
# debootstrap when the base image is missing. Ports: 3306, 8080, 3000,
# 7001-7003 on 127.0.0.1 (published in the bridge variant, bound in the host
# variant) must be free; load goes to 127.0.0.1 only.
# Without an engine: every check fails under CI=true, else each is skipped.
# Environment: BASE_IMAGE, BENCH_CPUS, BENCH_DB_CPUS, COMPOSE (see
# debian-compose.sh); CARGO_TARGET_DIR.
#
# --official: the same checks of the official-image stacks, as a user with
# Docker Hub (and ghcr.io, Packagist, GitHub, PECL, Debian's mirror) runs
# them: docker-compose.yml (+ docker-compose.host.yml) without the Debian
# override, every stack built from compose/<stack>/Dockerfile on its
# project's own base (MySQL 8.4, php-fpm, RoadRunner, FrankenPHP, Swoole,
# Node.js, the Rust servers), up, verified (a core's known deviations are
# reported as the core's, `harness verify`), compared, brought down, nothing
# left. Needs Compose v2 (`docker compose`: v1 refuses the host variant).
# It cannot run where no registry answers (this lab's CI: the Debian form).
#
# Exit status: 0 if every check passed; the last line says "N passed, M failed".
set -uo pipefail
OFFICIAL=0
if [ "${1:-}" = --official ]; then OFFICIAL=1; shift; fi

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(dirname "$HERE")
cd "$HERE" || exit 2

# shellcheck source=../scripts/check-lib.sh
. "$REPO/scripts/check-lib.sh"

NAME=compose/up-check.sh
PROJECT=benchlab-check-$$
DC="$HERE/debian-compose.sh"
# The profile of the binaries the images copy and the harness that checks
# them: release by default; scripts/test passes BENCH_PROFILE=debug, whose
# build cargo test has just made (the check is of the stacks, not a speed).
PROFILE=${BENCH_PROFILE:-release}
case "$PROFILE" in release | debug) ;; *) echo "BENCH_PROFILE must be release or debug" >&2; exit 2 ;; esac
RELEASE=${CARGO_TARGET_DIR:-$REPO/target}/$PROFILE
export BENCH_RELEASE_DIR=$RELEASE
HARNESS=$RELEASE/harness
SERVICES=(mysql php-fpm node rust-event-loop rust-coroutine rust-worker-pool)
STACKS=(php-fpm node rust-event-loop rust-coroutine rust-worker-pool)
declare -A PORT=([mysql]=3306 [php-fpm]=8080 [node]=3000
    [rust-event-loop]=7001 [rust-coroutine]=7002 [rust-worker-pool]=7003)
# one image per entry: the three Rust services share benchlab/rust:0.1.0-debian
BUILDS=(mysql php-fpm node rust-event-loop)
NOT_BUILT=(
    "roadrunner: needs the rr binary (ghcr.io/roadrunner-server, GitHub) and Composer packages (Packagist); no registry here serves them"
    "frankenphp: needs the frankenphp binary (dunglas/frankenphp on Docker Hub, GitHub); no registry here serves it"
    "swoole: needs the Swoole extension (phpswoole/swoole on Docker Hub, PECL; not in Debian); no registry here serves it"
)
MYSQL_URL=mysql://bench:bench@127.0.0.1:3306/bench
PREPARE="prepare (base image ${BASE_IMAGE:-benchlab/base:bookworm}, stage/)"
if [ $OFFICIAL -eq 1 ]; then
    NAME="compose/up-check.sh --official"
    SERVICES=(mysql php-fpm roadrunner frankenphp swoole node rust-event-loop rust-coroutine rust-worker-pool)
    STACKS=(php-fpm roadrunner frankenphp swoole node rust-event-loop rust-coroutine rust-worker-pool)
    PORT+=([roadrunner]=8081 [frankenphp]=8082 [swoole]=9501)
    BUILDS=(php-fpm roadrunner frankenphp swoole node rust-event-loop)
    NOT_BUILT=()
    PREPARE="prepare (docker compose pull mysql: mysql:8.4.3 from Docker Hub)"
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/benchlab-up-check.XXXXXX")
ACTIVE=""            # the variant whose project may have containers now
VOLUMES_SEEN=()      # volumes the project's containers mounted (anonymous ones carry no label)

# DCA: the debian-compose.sh command line for a variant and this project.
dc_args() { # variant
    if [ $OFFICIAL -eq 1 ]; then
        DCA=(docker compose -f "$HERE/docker-compose.yml")
        if [ "$1" = host ]; then DCA+=(-f "$HERE/docker-compose.host.yml"); fi
    else
        DCA=("$DC")
        if [ "$1" = host ]; then DCA+=(--host-network); fi
    fi
    DCA+=(-p "$PROJECT")
}

labelled() { # docker ps|network ls|volume ls ... of this project, one id/name a line
    case "$1" in
        containers) docker ps -aq --filter "label=com.docker.compose.project=$PROJECT" ;;
        networks) docker network ls -q --filter "label=com.docker.compose.project=$PROJECT" ;;
        volumes) docker volume ls -q --filter "label=com.docker.compose.project=$PROJECT" ;;
    esac
}

remember_volumes() {
    local c v
    for c in $(labelled containers); do
        for v in $(docker inspect -f '{{range .Mounts}}{{if eq .Type "volume"}}{{.Name}} {{end}}{{end}}' "$c" 2>/dev/null); do
            VOLUMES_SEEN+=("$v")
        done
    done
}

# What is left of the project: "containers: ...; networks: ...; volumes: ..." or nothing.
leftovers() {
    local out="" c n v left_v=()
    c=$(labelled containers | tr '\n' ' ')
    n=$({ labelled networks; docker network ls -q --filter "name=^${PROJECT}_"; } | sort -u | tr '\n' ' ')
    for v in $(labelled volumes) "${VOLUMES_SEEN[@]}"; do
        if docker volume inspect "$v" >/dev/null 2>&1; then left_v+=("$v"); fi
    done
    [ -z "${c// }" ] || out+="containers: ${c% }; "
    [ -z "${n// }" ] || out+="networks: ${n% }; "
    [ ${#left_v[@]} -eq 0 ] || out+="volumes: ${left_v[*]}; "
    printf '%s' "$out"
}

# down -v --remove-orphans of the project (output in $TMP/down.log).
compose_down() { # variant
    remember_volumes
    dc_args "$1"
    timeout 180 "${DCA[@]}" down -v --remove-orphans --timeout 20 >"$TMP/down.log" 2>&1
}

# Removes by label whatever down left (an interrupted up, a failed down).
force_remove() {
    local c n v
    for c in $(labelled containers); do docker rm -fv "$c" >/dev/null 2>&1; done
    for n in $(labelled networks) $(docker network ls -q --filter "name=^${PROJECT}_"); do
        docker network rm "$n" >/dev/null 2>&1
    done
    for v in $(labelled volumes) "${VOLUMES_SEEN[@]}"; do docker volume rm "$v" >/dev/null 2>&1; done
}

cleanup() {
    if [ -n "$ACTIVE" ]; then
        echo "$NAME: removing project $PROJECT ($ACTIVE) on exit" >&2
        compose_down "$ACTIVE" || true
        force_remove
        ACTIVE=""
    fi
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

not_built() {
    local l
    for l in "${NOT_BUILT[@]}"; do echo "not built: $l"; done
}

# The labels of every check, in order (for the no-engine case).
plan() {
    local s v
    echo "cargo build (servers, harness; BENCH_PROFILE=$PROFILE)"
    echo "$PREPARE"
    for s in "${BUILDS[@]}"; do echo "build $s"; done
    for v in bridge host; do
        echo "$v: ports free"
        echo "$v: up"
        for s in "${SERVICES[@]}"; do echo "$v: $s healthy"; done
        echo "$v: placement"
        echo "$v: mysql configured (my.cnf, init.sql)"
        for s in "${STACKS[@]}"; do echo "$v: harness verify $s"; done
        echo "$v: harness compare"
        echo "$v: down -v"
        echo "$v: nothing of the project left"
    done
}

timed() { # label seconds-since
    echo "     ($1: $((SECONDS - $2)) s)"
}

# --- an engine to talk to
why=""
if ! command -v docker >/dev/null 2>&1; then
    why="docker not found"
elif ! info=$(timeout 20 docker info --format '{{.ServerVersion}}' 2>&1); then
    why="no Docker engine answers (docker info: $(printf '%s\n' "$info" | grep -m 1 . || echo "no output"))"
elif ! command -v python3 >/dev/null 2>&1; then
    why="python3 not found"
elif [ $OFFICIAL -eq 1 ] && ! docker compose version >/dev/null 2>&1; then
    why="--official needs Compose v2 (docker compose; Debian's docker-compose v1 refuses the host variant)"
fi
if [ -n "$why" ]; then
    if [ "${CI:-}" = true ]; then
        while IFS= read -r l; do bad "$l: $why"; done < <(plan)
    else
        echo "skip $NAME: $why (under CI=true each check fails)"
        while IFS= read -r l; do echo "skip $l"; done < <(plan)
    fi
    not_built
    summary "$NAME"
    exit
fi
echo "$NAME: Docker engine $info, project $PROJECT"
start_all=$SECONDS

# --- the binaries the images copy, and the harness that checks them
t=$SECONDS
profile_flag=()
[ "$PROFILE" = release ] && profile_flag=(--release)
run "cargo build ${profile_flag[*]} (servers, harness)" \
    env CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-1}" \
    cargo build "${profile_flag[@]}" --locked --manifest-path "$REPO/Cargo.toml" \
    -p event-loop -p coroutine -p worker-pool -p harness
timed "cargo build" "$t"

# --- base image and stage/, then one image per entry
t=$SECONDS
prepared=0
dc_args bridge
if [ $OFFICIAL -eq 1 ]; then
    if run "$PREPARE" timeout 1200 "${DCA[@]}" pull mysql; then prepared=1; fi
elif run "$PREPARE" "$DC" prepare; then
    prepared=1
fi
built=1
for s in "${BUILDS[@]}"; do
    if [ $prepared -eq 1 ]; then
        run "build $s" timeout 1200 "${DCA[@]}" build "$s" || built=0
    else
        bad "build $s: not run (prepare failed)"
        built=0
    fi
done
timed "prepare + build" "$t"

# shellcheck disable=SC2016  # the inner shell expands $0
port_holders() { # ports...: those in use on this host, with what holds them
    local p out=""
    for p in "$@"; do
        if command -v ss >/dev/null 2>&1; then
            if [ -n "$(ss -Htln "sport = :$p" 2>/dev/null)" ]; then
                out+="$p ($(ss -Htlnp "sport = :$p" 2>/dev/null | grep -o 'users:(([^)]*' | head -n 1 | sed 's/users:((//')) "
            fi
        elif timeout 1 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$0"' "$p" 2>/dev/null; then
            out+="$p "
        fi
    done
    printf '%s' "$out"
}

# Waits until every service's container is healthy (at most $2 s).
wait_healthy() { # variant timeout
    local v=$1 deadline=$((SECONDS + $2)) s cid st pending
    declare -A state
    while :; do
        pending=0
        for s in "${SERVICES[@]}"; do
            [ "${state[$s]:-}" = healthy ] && continue
            cid=$(docker ps -aq --filter "label=com.docker.compose.project=$PROJECT" \
                --filter "label=com.docker.compose.service=$s" | head -n 1)
            if [ -z "$cid" ]; then
                state[$s]="no container"
            else
                st=$(docker inspect -f '{{.State.Status}}{{if .State.Health}} {{.State.Health.Status}}{{end}}' "$cid" 2>/dev/null)
                case "$st" in
                    "running healthy") state[$s]=healthy ;;
                    *) state[$s]=$st ;;
                esac
            fi
            [ "${state[$s]}" = healthy ] || pending=1
        done
        [ $pending -eq 0 ] && break
        [ $SECONDS -lt $deadline ] || break
        sleep 2
    done
    for s in "${SERVICES[@]}"; do
        if [ "${state[$s]}" = healthy ]; then
            ok "$v: $s healthy"
        else
            bad "$v: $s healthy: ${state[$s]} after $2 s"
            cid=$(docker ps -aq --filter "label=com.docker.compose.project=$PROJECT" \
                --filter "label=com.docker.compose.service=$s" | head -n 1)
            if [ -n "$cid" ]; then
                docker inspect -f '{{if .State.Health}}{{range .State.Health.Log}}{{.Output}}{{end}}{{end}}' "$cid" 2>/dev/null |
                    tail -n 5 | sed 's/^/     health: /'
                docker logs --tail 15 "$cid" 2>&1 | sed 's/^/     log: /'
            fi
        fi
    done
}

# How each container was placed: bridge: not on the host network, its port
# published on 127.0.0.1 only; host: on the host network, on the cpuset of the
# host file, nothing published.
check_placement() { # variant
    local v=$1 s cid got want problems=() cpus
    for s in "${SERVICES[@]}"; do
        cid=$(docker ps -q --filter "label=com.docker.compose.project=$PROJECT" \
            --filter "label=com.docker.compose.service=$s" | head -n 1)
        if [ -z "$cid" ]; then problems+=("$s: no running container"); continue; fi
        got=$(docker inspect -f '{{.HostConfig.NetworkMode}} cpuset={{.HostConfig.CpusetCpus}} ports={{range $p, $b := .HostConfig.PortBindings}}{{range $b}}{{.HostIp}}:{{.HostPort}},{{end}}{{end}}' "$cid")
        if [ "$v" = bridge ]; then
            want="ports=127.0.0.1:${PORT[$s]},"
            case "$got" in
                host\ *) problems+=("$s: on the host network") ;;
                *" $want") ;;
                *) problems+=("$s: want only $want, got $got") ;;
            esac
        else
            if [ "$s" = mysql ]; then cpus=${BENCH_DB_CPUS:-0-1}; else cpus=${BENCH_CPUS:-0-1}; fi
            want="host cpuset=$cpus ports="
            [ "$got" = "$want" ] || problems+=("$s: want $want, got $got")
        fi
    done
    if [ ${#problems[@]} -eq 0 ]; then
        if [ "$v" = bridge ]; then
            ok "$v: placement (bridge network, each port published on 127.0.0.1 only)"
        else
            ok "$v: placement (host network, cpuset ${BENCH_CPUS:-0-1}, database ${BENCH_DB_CPUS:-0-1}, nothing published)"
        fi
    else
        local joined
        joined=$(printf '%s; ' "${problems[@]}")
        bad "$v: placement: ${joined%; }"
    fi
}

check_mysql() { # variant
    local v=$1 cid out
    cid=$(docker ps -q --filter "label=com.docker.compose.project=$PROJECT" \
        --filter "label=com.docker.compose.service=mysql" | head -n 1)
    if [ -z "$cid" ]; then bad "$v: mysql configured (my.cnf, init.sql): no running container"; return; fi
    # the official image's client is `mysql`, MariaDB's `mariadb` (and `mysql`)
    if ! out=$(docker exec "$cid" mysql -h 127.0.0.1 -P 3306 -ubench -pbench -N -B \
        -e 'SELECT VERSION(), @@max_connections, @@skip_name_resolve, @@performance_schema, DATABASE()' bench 2>&1); then
        bad "$v: mysql configured (my.cnf, init.sql): bench/bench cannot log in over TCP"
        printf '%s\n' "$out" | sed 's/^/     /'
        return
    fi
    # VERSION  max_connections  skip_name_resolve  performance_schema  DATABASE
    if printf '%s\n' "$out" | awk -F'\t' '$2 == 600 && $3 == 1 && $4 == 0 && $5 == "bench" { found = 1 } END { exit !found }'; then
        ok "$v: mysql configured (my.cnf, init.sql): $(printf '%s' "$out" | tr '\t' ' ')"
    else
        bad "$v: mysql configured (my.cnf, init.sql): want max_connections 600, skip_name_resolve 1, performance_schema 0, database bench; got: $(printf '%s' "$out" | tr '\t' ' ')"
    fi
}

check_verify() { # variant stack
    local v=$1 s=$2 out
    if out=$(timeout 180 "$HARNESS" verify "http://127.0.0.1:${PORT[$s]}" 2>&1); then
        ok "$v: harness verify $s ($(printf '%s\n' "$out" | grep -E '^[0-9]+ rows:' | tail -n 1))"
    else
        bad "$v: harness verify $s (http://127.0.0.1:${PORT[$s]})"
        printf '%s\n' "$out" | grep -Ev '^PASS ' | sed 's/^/     /'
    fi
}

check_compare() { # variant
    local v=$1 s out rc targets=() results
    for s in "${STACKS[@]}"; do targets+=(--target "$s=http://127.0.0.1:${PORT[$s]}"); done
    rm -rf "$TMP/results"
    timeout 600 "$HARNESS" compare "${targets[@]}" --mysql-url "$MYSQL_URL" \
        --workloads hello,work -d 1s --runs 1 --warmup 0 --out "$TMP/results" >"$TMP/compare.log" 2>&1
    rc=$?
    results=$(find "$TMP/results" -name results.json 2>/dev/null | head -n 1)
    if [ $rc -ne 0 ] || [ -z "$results" ]; then
        if [ -z "$results" ]; then rc="$rc, no results.json"; fi
        bad "$v: harness compare: exit $rc"
        tail -n 30 "$TMP/compare.log" | sed 's/^/     /'
        return
    fi
    # every target ran, passed every contract row, and every cell was
    # measured with requests answered and none failed
    if out=$(python3 - "$results" "${STACKS[@]}" <<'PY'
import json
import sys

doc = json.load(open(sys.argv[1], encoding="utf-8"))
want = sys.argv[2:]
servers = {s["name"]: s for s in doc.get("servers", [])}
problems, cells = [], []
for name in want:
    s = servers.get(name)
    if s is None:
        problems.append(f"{name}: not in results.json")
        continue
    if s.get("status") != "ran":
        problems.append(f"{name}: {s.get('status')}: {s.get('reason')}")
    contract = s.get("contract") or {}
    for f in contract.get("failed", []):
        problems.append(f"{name}: contract row {f['row']}: {f['why']}")
    rows = [r for r in doc.get("rows", []) if r.get("server") == name]
    if not rows:
        problems.append(f"{name}: no row measured")
    for r in rows:
        runs = r.get("runs") or []
        okc = sum(x.get("ok", 0) for x in runs)
        failed = sum(x.get("failed", 0) for x in runs)
        if r.get("status") != "ok" or not runs or okc == 0 or failed:
            problems.append(f"{name} {r.get('workload')}: status {r.get('status')}, "
                            f"{okc} ok, {failed} failed ({r.get('error')})")
        else:
            rps = sum(x.get("ok_per_s", 0) for x in runs) / len(runs)
            cells.append(f"{name} {r.get('workload')} {rps:.0f}/s")
if problems:
    print("\n".join(problems))
    sys.exit(1)
print(", ".join(cells))
PY
    ); then
        ok "$v: harness compare: $out"
    else
        bad "$v: harness compare: $results"
        printf '%s\n' "$out" | sed 's/^/     /'
    fi
}

# Runs one variant: everything between a free set of ports and nothing left.
variant() { # bridge|host
    local v=$1 busy s t=$SECONDS
    local fails_before=$failed
    busy=$(port_holders "${PORT[@]}")
    if [ -n "$busy" ]; then
        bad "$v: ports free: in use on this host: $busy"
        while IFS= read -r l; do
            case "$l" in "$v: ports free") ;; "$v: "*) bad "$l: not run (ports in use)" ;; esac
        done < <(plan)
        return
    fi
    ok "$v: ports free (${PORT[*]})"
    if [ $built -ne 1 ]; then
        while IFS= read -r l; do
            case "$l" in "$v: ports free") ;; "$v: "*) bad "$l: not run (an image did not build)" ;; esac
        done < <(plan)
        return
    fi
    ACTIVE=$v
    VOLUMES_SEEN=()
    dc_args "$v"
    local health_wait=150
    if timeout 600 "${DCA[@]}" up -d --no-build "${SERVICES[@]}" >"$TMP/up.log" 2>&1; then
        ok "$v: up (${SERVICES[*]})"
    else
        bad "$v: up"
        tail -n 20 "$TMP/up.log" | sed 's/^/     /'
        health_wait=10 # what up started may still turn healthy; the rest will not
    fi
    wait_healthy "$v" "$health_wait"
    remember_volumes
    check_placement "$v"
    check_mysql "$v"
    for s in "${STACKS[@]}"; do check_verify "$v" "$s"; done
    check_compare "$v"
    if compose_down "$v"; then
        ok "$v: down -v"
    else
        bad "$v: down -v"
        tail -n 20 "$TMP/down.log" | sed 's/^/     /'
    fi
    # what down itself left, before anything else removes it
    local left
    left=$(leftovers)
    if [ -z "$left" ]; then
        ok "$v: nothing of the project left (containers, networks, volumes of $PROJECT)"
    else
        force_remove
        local still
        still=$(leftovers)
        bad "$v: nothing of the project left: down left ${left%; } (removed by label now; still there: ${still:-nothing})"
    fi
    ACTIVE=""
    timed "$v, $((failed - fails_before)) failed" "$t"
}

variant bridge
variant host

not_built
timed "$NAME in all" "$start_all"
summary "$NAME"
