#!/usr/bin/env bash
# docker compose where Docker Hub is out of reach: docker-compose.yml +
# docker-compose.debian.yml (+ docker-compose.host.yml with --host-network),
# after making sure what those builds need is there. See compose/README.md.
#
#   compose/debian-compose.sh [--host-network] COMPOSE-ARGS...
#       compose/debian-compose.sh up -d --build        # mysql (MariaDB), php-fpm, node, rust-*
#       compose/debian-compose.sh --host-network up -d --build mysql node
#       compose/debian-compose.sh ps | logs node | down -v
#   compose/debian-compose.sh prepare                  # only steps 1-3 below
#
# Before a command that may build (build, up, create, run) and for prepare:
#   1. the base image $BASE_IMAGE (default benchlab/base:bookworm) exists;
#      if not, and it is benchlab/base:<this host's release>[-SUFFIX], it is made:
#      debootstrap --variant=minbase of the host's release from the host's own
#      apt mirror (the first URIs: of /etc/apt/sources.list.d/debian.sources,
#      else the first deb line of /etc/apt/sources.list), then `docker import`.
#      Needs root and debootstrap; takes a few minutes.
#   2. stage/rust gets event-loop, coroutine, worker-pool from
#      $BENCH_RELEASE_DIR (default: $CARGO_TARGET_DIR/release, else
#      ../target/release; build them with
#      `cargo build --release --locked -p event-loop -p coroutine -p worker-pool`);
#      stage/node gets $NODE_BIN (default: the node on PATH; >= 20),
#      node/server.js, package.json, package-lock.json and node/node_modules
#      (as `npm ci` left it; when absent, `npm ci --omit=dev` runs in stage/node).
#   3. APT_SOURCES: the host's apt sources (so the images get the host's
#      package versions), unless APT_SOURCES is set (set it empty for the
#      base's own sources).
#
# Compose: $COMPOSE if set (e.g. COMPOSE=docker-compose), else `docker compose`
# (v2) if present, else Debian's docker-compose (v1). v1 refuses network_mode:
# host beside the base file's ports: lists (Docker ignores them; v1 raises
# "host network_mode is incompatible with port_bindings"), so with
# --host-network and v1 the merged configuration (`config`) is written to a
# temporary file without those ports and run with --project-directory compose/
# (same project name, relative paths as usual).
#
# Exit status: that of compose; 1 with a message when a step above fails.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(dirname "$HERE")

die() { echo "debian-compose.sh: $*" >&2; exit 1; }
say() { echo "debian-compose.sh: $*" >&2; }

TMPS=()
# shellcheck disable=SC2317  # called by the trap
cleanup() { if [ ${#TMPS[@]} -gt 0 ]; then rm -rf "${TMPS[@]}"; fi; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

host_network=0
if [ "${1:-}" = --host-network ]; then host_network=1; shift; fi
if [ $# -eq 0 ]; then sed -n '2,37p' "$0" >&2; exit 2; fi

export BASE_IMAGE=${BASE_IMAGE:-benchlab/base:bookworm}
# shellcheck disable=SC1091  # the host's, read at run time
codename=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}") || codename=""

# The host's apt mirror: the first URIs: of debian.sources, else the first
# deb line of sources.list (its [options] skipped).
host_mirror() {
    local m=""
    if [ -r /etc/apt/sources.list.d/debian.sources ]; then
        m=$(awk 'tolower($1) == "uris:" { print $2; exit }' /etc/apt/sources.list.d/debian.sources)
    fi
    if [ -z "$m" ] && [ -r /etc/apt/sources.list ]; then
        m=$(awk '$1 == "deb" {
                for (i = 2; i <= NF; i++) {
                    if ($i ~ /^\[/) { while ($i !~ /\]$/ && i < NF) i++; continue }
                    print $i; exit
                }
            }' /etc/apt/sources.list)
    fi
    [ -n "$m" ] || return 1
    echo "$m"
}

# The host's apt sources as text: debian.sources (deb822), else the deb lines
# of sources.list.
host_apt_sources() {
    if [ -r /etc/apt/sources.list.d/debian.sources ]; then
        cat /etc/apt/sources.list.d/debian.sources
    elif [ -r /etc/apt/sources.list ]; then
        grep -E '^[[:space:]]*deb[[:space:]]' /etc/apt/sources.list || true
    fi
}

ensure_base() {
    local mirror tmp
    if docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then return 0; fi
    [ -n "$codename" ] || die "base image $BASE_IMAGE not found, and /etc/os-release names no VERSION_CODENAME to debootstrap"
    case "$BASE_IMAGE" in
        "benchlab/base:$codename" | "benchlab/base:$codename"-*) ;;
        *) die "base image $BASE_IMAGE not found; only benchlab/base:${codename}[-SUFFIX] (this host's release) is made here. Make $BASE_IMAGE yourself (docker import), or set BASE_IMAGE (the Dockerfile.debian files install bookworm's package names: php8.2, mariadb 10.11)" ;;
    esac
    [ "$(id -u)" -eq 0 ] || die "base image $BASE_IMAGE not found; making it needs root (debootstrap)"
    command -v debootstrap >/dev/null 2>&1 || die "base image $BASE_IMAGE not found; making it needs debootstrap (apt-get install debootstrap)"
    mirror=$(host_mirror) || die "base image $BASE_IMAGE not found, and no apt mirror in /etc/apt/sources.list.d/debian.sources or /etc/apt/sources.list to debootstrap from"
    tmp=$(mktemp -d "${TMPDIR:-/var/tmp}/benchlab-base.XXXXXX")
    TMPS+=("$tmp")
    say "making $BASE_IMAGE: debootstrap --variant=minbase $codename $mirror (a few minutes)"
    if ! debootstrap --variant=minbase "$codename" "$tmp/root" "$mirror" >"$tmp/debootstrap.log" 2>&1; then
        tail -n 20 "$tmp/debootstrap.log" >&2
        die "debootstrap --variant=minbase $codename $mirror failed (its log above)"
    fi
    tar -C "$tmp/root" -c . | docker import - "$BASE_IMAGE" >/dev/null || die "docker import of the debootstrap tree as $BASE_IMAGE failed"
    rm -rf "$tmp"
    say "made $BASE_IMAGE"
}

# The libraries a node binary may need that a minbase tree has.
MINBASE_LIBS='linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libstdc\+\+\.so|libgcc_s\.so'

stage() {
    local rel b node major extra
    rel=${BENCH_RELEASE_DIR:-${CARGO_TARGET_DIR:-$REPO/target}/release}
    for b in event-loop coroutine worker-pool; do
        [ -x "$rel/$b" ] || die "$rel/$b not found: build the release binaries first (cargo build --release --locked -p event-loop -p coroutine -p worker-pool), or set BENCH_RELEASE_DIR"
        cp -p "$rel/$b" "$HERE/stage/rust/$b"
    done

    node=${NODE_BIN:-$(command -v node || true)}
    if [ -z "$node" ] || [ ! -x "$node" ]; then die "node not found: Node.js >= 20 on PATH, or NODE_BIN=/path/to/node"; fi
    node=$(readlink -f "$node")
    major=$("$node" -p 'process.versions.node.split(".")[0]') || die "$node does not run"
    [ "$major" -ge 20 ] || die "$node is Node.js $("$node" --version); package.json wants >= 20 (Debian bookworm's nodejs is 18): set NODE_BIN"
    extra=$(ldd "$node" 2>/dev/null | grep -Ev "$MINBASE_LIBS" | awk '{print $1}' | tr '\n' ' ' || true)
    [ -z "$extra" ] || die "$node needs libraries the base image lacks ($extra): use a self-contained build (nodejs.org, NodeSource), NODE_BIN"
    cp -p "$node" "$HERE/stage/node/node"
    cp -p "$HERE/node/server.js" "$HERE/node/package.json" "$HERE/node/package-lock.json" "$HERE/stage/node/"
    rm -rf "$HERE/stage/node/node_modules"
    if [ -d "$HERE/node/node_modules" ]; then
        cp -a "$HERE/node/node_modules" "$HERE/stage/node/"
    else
        say "compose/node/node_modules not found: npm ci --omit=dev in stage/node"
        (cd "$HERE/stage/node" && npm ci --omit=dev --no-audit --no-fund --loglevel=error) ||
            die "npm ci in compose/stage/node failed"
    fi
}

prepare() {
    command -v docker >/dev/null 2>&1 || die "docker not found"
    ensure_base
    stage
    if [ -z "${APT_SOURCES+set}" ]; then
        APT_SOURCES=$(host_apt_sources)
        export APT_SOURCES
    fi
}

# The compose command word (skipping global options and their values).
command_of() {
    local skip=0 a
    for a in "$@"; do
        if [ $skip -eq 1 ]; then skip=0; continue; fi
        case "$a" in
            -f|--file|-p|--project-name|--project-directory|--env-file|--profile|-H|--host|-c|--context|--ansi|--log-level)
                skip=1 ;;
            -*) ;;
            *) echo "$a"; return 0 ;;
        esac
    done
}

cmd=$(command_of "$@")
case "$cmd" in
    prepare) prepare; exit 0 ;;
    build|up|create|run) prepare ;;
esac

if [ -n "${COMPOSE:-}" ]; then
    read -ra compose <<<"$COMPOSE"
elif docker compose version >/dev/null 2>&1; then
    compose=(docker compose)
elif command -v docker-compose >/dev/null 2>&1; then
    compose=(docker-compose)
else
    die "neither 'docker compose' nor 'docker-compose' found (apt-get install docker-compose)"
fi
v1=0
case "$("${compose[@]}" version --short 2>/dev/null || true)" in 1.*) v1=1 ;; esac

files=(-f "$HERE/docker-compose.yml" -f "$HERE/docker-compose.debian.yml")
if [ $host_network -eq 1 ]; then
    files+=(-f "$HERE/docker-compose.host.yml")
    if [ $v1 -eq 1 ]; then
        merged=$(mktemp "${TMPDIR:-/tmp}/benchlab-compose-host.XXXXXX")
        TMPS+=("$merged")
        "${compose[@]}" "${files[@]}" config >"$merged" || die "${compose[*]} config of the host variant failed"
        python3 - "$merged" <<'PY' || die "could not drop the ports: of the host-network services ($merged)"
import sys
import yaml
path = sys.argv[1]
with open(path, encoding="utf-8") as fh:
    doc = yaml.safe_load(fh)
for svc in (doc.get("services") or {}).values():
    if svc.get("network_mode") == "host":
        svc.pop("ports", None)
with open(path, "w", encoding="utf-8") as fh:
    yaml.safe_dump(doc, fh, default_flow_style=False, sort_keys=False)
PY
        files=(--project-directory "$HERE" -f "$merged")
    fi
fi

status=0
"${compose[@]}" "${files[@]}" "$@" || status=$?
exit "$status"
