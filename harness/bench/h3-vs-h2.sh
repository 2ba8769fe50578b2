#!/usr/bin/env bash
# The engine over HTTP/3 against itself over HTTP/2 with TLS, same server,
# same shape: `harness run --h3 --streams STREAMS -c CONNS` and `harness
# run --h2 --streams STREAMS -c CONNS`, GET /hello on the event-loop server
# (h2 by ALPN on its TCP port, h3 on the UDP port of the same number, one
# lab certificate), in interleaved rounds (the order alternates). Per
# protocol: requests per second (median of the rounds, range) and the
# generator's own CPU per request (user + system, /usr/bin/time), and the
# h3 / h2 ratios per round, median and range. Every response is verified
# (a failure stops the bench).
#
# Where oha is installed (`cargo install oha --locked --features http3`),
# oha's HTTP/3 runs in the same rounds with the same shape (`oha
# --http-version 3 -c CONNS -p STREAMS -z DURATION`, trusting the same CA),
# and the engine's h3 is read against it. oha counts a response by its
# status (the engine compares every body), and its h3 run lingers after
# the deadline (about 30 s on quinn's close), so its rate is its 200s over
# the -z window, not over its wall time, and its CPU per request is its
# whole process's user + system over those 200s. oha runs on
# --worker-threads THREADS, the engine on --threads THREADS.
#
#   harness/bench/h3-vs-h2.sh                 # 3 rounds, -c 4 --streams 16, 3 s each
#   ROUNDS=5 DURATION=5 CONNS=8 STREAMS=32 harness/bench/h3-vs-h2.sh
#
# Environment: ROUNDS (3), DURATION (s, 3), CONNS (4), STREAMS (16),
# THREADS (1: the engine's --threads), WORKERS (1: event loops). Needs
# release builds of event-loop and harness (built here if missing). Load
# goes to 127.0.0.1 only; the server is stopped by its PID; every load is
# bounded by its duration (and `timeout`).
set -euo pipefail

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-3}
CONNS=${CONNS:-4}
STREAMS=${STREAMS:-16}
THREADS=${THREADS:-1}
WORKERS=${WORKERS:-1}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
WORK=$(mktemp -d /tmp/h3-vs-h2.XXXXXX)
SERVER_PID=

cleanup() {
    if [ -n "$SERVER_PID" ]; then
        kill "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT

if [ ! -x "$TARGET_DIR/release/event-loop" ] || [ ! -x "$TARGET_DIR/release/harness" ]; then
    (cd "$ROOT" && cargo build --release -p event-loop -p harness)
fi
HARNESS=$TARGET_DIR/release/harness
"$HARNESS" certs "$WORK/cert" >/dev/null

"$TARGET_DIR/release/event-loop" --addr 127.0.0.1:0 --workers "$WORKERS" \
    --tls-cert "$WORK/cert/cert.pem" --tls-key "$WORK/cert/key.pem" --h3 \
    >"$WORK/el.out" 2>"$WORK/el.err" &
SERVER_PID=$!
for _ in $(seq 1 100); do
    grep -q "listening on" "$WORK/el.out" && break
    sleep 0.05
done
PORT=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$WORK/el.out" | head -1)
[ -n "$PORT" ] || { echo "event-loop did not start: $(cat "$WORK/el.err")" >&2; exit 1; }
URL="https://127.0.0.1:$PORT/hello"

# engine_run PROTO ROUND: the engine over --h3 or --h2 for DURATION s;
# appends "rps cpu_us_per_req" to PROTO.rows.
engine_run() {
    local proto=$1 round=$2 out="$WORK/$1.$2"
    /usr/bin/time -f "%U %S" -o "$out.time" \
        timeout $((DURATION + 30)) "$HARNESS" run "--$proto" --cacert "$WORK/cert/ca.pem" \
        --streams "$STREAMS" -c "$CONNS" --threads "$THREADS" --io epoll \
        -d "${DURATION}s" --format json "$URL" >"$out.json" 2>"$out.err" || true
    local row
    row=$(python3 - "$out.json" "$out.time" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
user, sys_ = map(float, open(sys.argv[2]).read().split()[-2:])
ok, failed = d["requests"]["ok"], sum(d["failures"].values())
if ok == 0 or failed:
    sys.exit(f"ok {ok}, failed {failed}: {d['failures']}")
lost = d.get("quic", {}).get("lost_packets", 0)
print(d["requests"]["ok_per_s"], (user + sys_) * 1e6 / ok, lost)
PY
    ) || { echo "$proto round $round: the engine failed: $(cat "$out.err")" >&2; exit 1; }
    echo "$row" >>"$WORK/$proto.rows"
}

# oha_run ROUND: oha's HTTP/3, same shape; appends "rps cpu_us_per_req" to
# oha.rows (rate = its 200s over the -z window; see the header).
oha_run() {
    local round=$1 out="$WORK/oha.$1"
    /usr/bin/time -f "%U %S" -o "$out.time" \
        timeout $((DURATION + 90)) "$OHA" --http-version 3 --cacert "$WORK/cert/ca.pem" \
        -c "$CONNS" -p "$STREAMS" --worker-threads "$THREADS" -z "${DURATION}s" \
        --no-tui --output-format json "$URL" >"$out.json" 2>"$out.err" || true
    local row
    row=$(python3 - "$out.json" "$out.time" "$DURATION" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
user, sys_ = map(float, open(sys.argv[2]).read().split()[-2:])
ok = d["statusCodeDistribution"].get("200", 0)
if ok == 0:
    sys.exit(f"no 200s: {d.get('errorDistribution')}")
print(ok / float(sys.argv[3]), (user + sys_) * 1e6 / ok)
PY
    ) || { echo "oha round $round failed: $(cat "$out.err")" >&2; exit 1; }
    echo "$row" >>"$WORK/oha.rows"
}
OHA=$(command -v oha || true)
[ -z "$OHA" ] && [ -x "$HOME/.cargo/bin/oha" ] && OHA=$HOME/.cargo/bin/oha

for r in $(seq 1 "$ROUNDS"); do
    if [ $((r % 2)) = 1 ]; then order="h3 h2 oha"; else order="oha h2 h3"; fi
    for p in $order; do
        if [ "$p" = oha ]; then
            [ -n "$OHA" ] && oha_run "$r"
        else
            engine_run "$p" "$r"
        fi
    done
done

echo "harness run --h3 / --h2 --streams $STREAMS -c $CONNS --threads $THREADS --io epoll, ${DURATION}s x $ROUNDS interleaved rounds, GET /hello on event-loop --workers $WORKERS; $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$WORK" <<'PY'
import statistics, sys
work = sys.argv[1]
def rows(name):
    return [tuple(map(float, l.split())) for l in open(f"{work}/{name}.rows")]
def span(xs, f):
    return f"{f(statistics.median(xs))} (range {f(min(xs))}-{f(max(xs))})"
h3, h2 = rows("h3"), rows("h2")
for name, r in (("h3", h3), ("h2", h2)):
    print(f"{name:<7} rps {span([x[0] for x in r], lambda v: f'{v:.0f}')},"
          f" CPU {span([x[1] for x in r], lambda v: f'{v:.2f}')} us/request"
          + (f", QUIC packets lost {span([x[2] for x in r], lambda v: f'{v:.0f}')}" if name == "h3" else ""))
cpu = [a[1] / b[1] for a, b in zip(h3, h2)]
rps = [a[0] / b[0] for a, b in zip(h3, h2)]
print(f"h3 / h2: CPU per request {span(cpu, lambda v: f'{v:.2f}')}x, RPS {span(rps, lambda v: f'{v:.2f}')}x")
try:
    oha = rows("oha")
except FileNotFoundError:
    print("(oha not installed: `cargo install oha --locked --features http3` adds its HTTP/3 rows)")
    sys.exit(0)
print(f"oha h3  rps {span([x[0] for x in oha], lambda v: f'{v:.0f}')} (200s over the -z window),"
      f" CPU {span([x[1] for x in oha], lambda v: f'{v:.2f}')} us/request (its whole process)")
cpu = [a[1] / b[1] for a, b in zip(h3, oha)]
rps = [a[0] / b[0] for a, b in zip(h3, oha)]
print(f"engine h3 / oha h3: CPU per request {span(cpu, lambda v: f'{v:.2f}')}x, RPS {span(rps, lambda v: f'{v:.2f}')}x")
PY
