#!/usr/bin/env bash
# CI validation of deploy/ without a cluster or a Docker engine:
#   - render.sh renders for N agents (two values of N) and rejects bad input
#   - check_manifests.py: every rendered document against Kubernetes' schemas
#     (strict, offline, from PyPI kubernetes-validate), the Indexed Job's
#     structure, the harness Dockerfile; and its --self-test (broken copies
#     must be rejected)
#   - bash -n on the scripts
# Needs the Python tools venv scripts/install-deps makes (or BENCHLAB_PYTHON).
# Exit status: 0 if every check passed; the last line says "N passed, M failed".
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$HERE" || exit 2
PY=${BENCHLAB_PYTHON:-${XDG_CACHE_HOME:-$HOME/.cache}/benchlab/pytools/bin/python}

. "$HERE/../scripts/check-lib.sh"
# rejects LABEL ARGS...: render.sh must exit 2 with a message for these arguments.
rejects() {
    local label=$1 out status
    shift
    out=$(kubernetes/render.sh "$@" 2>&1 >/dev/null)
    status=$?
    if [ "$status" -eq 2 ] && [ -n "$out" ]; then ok "render.sh rejects $label"; else bad "render.sh rejects $label (exit $status: $out)"; fi
}

for f in check.sh kubernetes/render.sh; do run "bash -n $f" bash -n "$f"; done

if [ ! -x "$PY" ]; then
    bad "no Python tools at $PY (scripts/install-deps makes them)"
else
    tmp=$(mktemp -d)
    url=http://app.bench.svc.cluster.local:8080/hello
    for n in 1 4; do
        if kubernetes/render.sh --agents "$n" --url "$url" -c 32 -d 2m --rate 8000 --run "ci-$n" >"$tmp/$n.yaml" 2>"$tmp/$n.err"; then
            run "manifests for $n agents (schemas, structure, Dockerfile)" \
                "$PY" check_manifests.py "$tmp/$n.yaml" --agents "$n" --url "$url" --dockerfile Dockerfile
        else
            bad "render.sh --agents $n"; sed 's/^/     /' "$tmp/$n.err"
        fi
    done
    run "check_manifests.py --self-test" \
        "$PY" check_manifests.py "$tmp/4.yaml" --agents 4 --url "$url" --dockerfile Dockerfile --self-test
    rm -rf "$tmp"
fi

# The Job's own scripts, run here as processes against a local reference
# server: 4 agents with one START_AT, then the merge step (run_local.py).
# Needs the debug builds `cargo test` leaves in the target directory.
bin=${CARGO_TARGET_DIR:-$HERE/../target}/debug
if [ -x "$bin/harness" ] && [ -x "$bin/event-loop" ] && [ -x "$PY" ]; then
    tmp=$(mktemp -d)
    "$bin/event-loop" --addr 127.0.0.1:0 >"$tmp/server.out" 2>&1 &
    server=$!
    addr=""
    for _ in $(seq 300); do
        addr=$(sed -n 's/^listening on //p' "$tmp/server.out")
        [ -n "$addr" ] || ! kill -0 "$server" 2>/dev/null && break
        sleep 0.1
    done
    if [ -z "$addr" ]; then
        bad "the local run: event-loop did not start"; sed 's/^/     /' "$tmp/server.out"
    elif kubernetes/render.sh --agents 4 --url "http://$addr/hello" -c 2 -d 2s --lead 3 --run local \
            >"$tmp/job.yaml" 2>/dev/null; then
        mkdir -p "$tmp/results"
        run "the Job's scripts, locally: 4 agents, one start, the merge adds up" \
            "$PY" run_local.py "$tmp/job.yaml" --harness "$bin/harness" --results "$tmp/results"
    else
        bad "render.sh for the local run"
    fi
    kill "$server" 2>/dev/null
    wait "$server" 2>/dev/null
    rm -rf "$tmp"
elif [ "${CI:-}" = "true" ]; then
    bad "the local run: no $bin/harness or $bin/event-loop (cargo test builds them)"
else
    echo "skip the local run: build the harness and event-loop first (cargo build)"
fi

rejects "no --agents" --url http://a/
rejects "no --url" --agents 2
rejects "0 agents" --agents 0 --url http://a/
rejects "a non-http URL" --agents 2 --url ftp://a/
rejects "a sub-second duration" --agents 2 --url http://a/ -d 500ms
rejects "an image on :latest" --agents 2 --url http://a/ --image benchlab/harness:latest
rejects "a run id that is no DNS label" --agents 2 --url http://a/ --run Bad_Id

summary deploy/check.sh
