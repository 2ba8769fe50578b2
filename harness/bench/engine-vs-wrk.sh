#!/usr/bin/env bash
# Our engine on each I/O backend (io_uring with and without --gather,
# epoll) against wrk (Debian's) and oha (crates.io, where installed) on
# the same reference server, the
# same -c and the same duration, in interleaved rounds; medians of the
# rounds. Per tool and c: requests per second and the generator's own CPU
# time per request (user + system of its process, from wait4's rusage via
# /usr/bin/time), each as a ratio to wrk's, with the range of the rounds'
# ratios; beside them the server's CPU per request (/proc/PID/stat) and the
# cores both kept busy over the run's wall time, which says whether the generator is a bottleneck.
# Then the generator's added
# latency on each backend at /sleep?ms=20 with --rate 2000: its p99 minus
# the server's own p99 as tcpdump saw it on lo (and minus 20 ms), beside
# the schedule's lateness (the engine's own figure). Then
# HOLD_CONNS connections held from one process: KiB of RSS each.
#
#   harness/bench/engine-vs-wrk.sh                     # c = 50, 100, 1000; 3 rounds of 3 s
#   ROUNDS=5 DURATION=5 CONNS="100" harness/bench/engine-vs-wrk.sh
#
# Environment: ROUNDS (3), DURATION (s, 3), CONNS ("50 100 1000"),
# THREADS (the engine's and wrk's threads, 2), RATE_S (s per latency run, 5;
# 0 skips),
# HOLD_CONNS (19800; 0 skips), REF_SERVER (event-loop), SERVER_ARGS
# ("--workers $(nproc)": a server that can use every core, so that what
# the generator spends is taken from it; with one event loop the server is
# bound to one core and the generator's savings leave its own core idle).
# Load goes to
# 127.0.0.1 only; everything it starts is stopped by PID; each load is
# bounded by its duration (and `timeout`), so the script ends by itself.
set -euo pipefail

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-3}
CONNS=${CONNS:-"50 100 1000"}
THREADS=${THREADS:-2}
RATE_S=${RATE_S:-5}
HOLD_CONNS=${HOLD_CONNS:-19800}
REF_SERVER=${REF_SERVER:-event-loop}
SERVER_ARGS=${SERVER_ARGS:-"--workers $(nproc)"}
# shellcheck source=harness/bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_init engine-vs-wrk

need wrk "apt-get install wrk"
need jq "apt-get install jq"
need python3 "apt-get install python3"
need_time
OHA=$(command -v oha || true)
[ -n "$OHA" ] || echo "(oha not installed: \`cargo install oha --locked\` adds its rows)"

build_release "$REF_SERVER"

start_ref_server
echo "== $REF_SERVER $SERVER_ARGS at $ADDR (pid $SERVER_PID); $ROUNDS rounds of ${DURATION}s per tool and c"
URL="http://$ADDR/hello"

RESULTS=$WORK/results.tsv # tool c round requests seconds cpu_s server_cpu_s elapsed_s
: >"$RESULTS"

one() { # TOOL C ROUND
    local tool=$1 c=$2 round=$3 o=$WORK/$1-$2-$3 n= ticks0
    ticks0=$(server_ticks)
    case $tool in
    wrk)
        timed "$o" wrk -t"$THREADS" -c"$c" -d"${DURATION}s" "$URL"
        n=$(awk '/requests in/ {print $1}' "$o.out")
        ;;
    uring | uring0 | epoll)
        # uring0: io_uring with --gather 0, each wait ending at the first
        # completion (what gathering saves).
        local io=${tool%0} gather=400us
        [ "$tool" = uring0 ] && gather=0
        timed "$o" "$HARNESS" run "$URL" -c "$c" -d "${DURATION}s" --threads "$THREADS" --io "$io" --gather "$gather" --format json
        n=$(jq '.requests.ok' "$o.out" 2>/dev/null || true)
        local failed
        failed=$(jq '.requests.failed' "$o.out" 2>/dev/null || echo '?')
        [ "$failed" = 0 ] || echo "   ($tool -c $c: $failed failed)"
        [ "$(jq -r '.settings.io' "$o.out" 2>/dev/null)" = "$io" ] || echo "   ($tool -c $c ran on $(jq -r '.settings.io' "$o.out" 2>/dev/null))"
        ;;
    oha)
        timed "$o" "$OHA" -z "${DURATION}s" -c "$c" --no-tui --output-format json "$URL"
        n=$(jq '[.statusCodeDistribution[]] | add' "$o.out" 2>/dev/null || true)
        ;;
    esac
    [ -n "$n" ] && [ "$n" != null ] || { echo "   $tool -c $c round $round: no result ($(tail -1 "$o.err"))"; return; }
    local server_cpu
    server_cpu=$(awk -v a="$ticks0" -v b="$(server_ticks)" -v hz="$CLK_TCK" 'BEGIN {print (b - a) / hz}')
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$tool" "$c" "$round" "$n" "$DURATION" "$(cpu_of "$o")" "$server_cpu" "$(awk '{print $4}' "$o.time")" >>"$RESULTS"
}

TOOLS="wrk uring uring0 epoll"
[ -n "$OHA" ] && TOOLS="$TOOLS oha"
for round in $(seq 1 "$ROUNDS"); do
    for c in $CONNS; do
        # Interleaved, the order turned each round: no tool always runs
        # right after the same neighbour.
        order=$(echo $TOOLS | tr ' ' '\n' | awk -v r="$round" '{a[NR]=$0} END {for (i = 0; i < NR; i++) print a[(i + r) % NR + 1]}')
        for tool in $order; do one "$tool" "$c" "$round"; done
    done
    echo "   round $round done"
done

echo "== closed loop /hello, medians of $ROUNDS rounds (RPS and CPU per request as ratios to wrk; in brackets the range of the rounds' ratios)"
echo "   server: the reference server's CPU per request and the cores generator + server kept busy (of $(nproc))"
python3 - "$RESULTS" <<'PY'
import sys, statistics as st
rows = [l.split("\t") for l in open(sys.argv[1]) if l.strip()]
# (tool, c) -> {round: (rps, generator µs/req, server µs/req, cores busy)}
cells = {}
for tool, c, rnd, n, secs, cpu, server_cpu, elapsed in rows:
    n, secs, cpu, server_cpu = int(float(n)), float(secs), float(cpu), float(server_cpu)
    elapsed = max(float(elapsed), secs)
    cells.setdefault((tool, int(c)), {})[rnd] = (
        n / secs, cpu * 1e6 / max(n, 1), server_cpu * 1e6 / max(n, 1), (cpu + server_cpu) / elapsed)
def spread(xs):
    return f"({min(xs):.2f}–{max(xs):.2f})" if len(xs) > 1 else ""
for c in sorted({c for _, c in cells}):
    w = cells.get(("wrk", c), {})
    wrps = st.median(x[0] for x in w.values()) if w else float("nan")
    wus = st.median(x[1] for x in w.values()) if w else float("nan")
    print(f"   -c {c}")
    for tool in ["wrk", "uring", "uring0", "epoll", "oha"]:
        v = cells.get((tool, c))
        if not v:
            continue
        rps, us = st.median(x[0] for x in v.values()), st.median(x[1] for x in v.values())
        server_us, busy = st.median(x[2] for x in v.values()), st.median(x[3] for x in v.values())
        # Each round's ratio to the wrk run of the same round: the rounds
        # are interleaved, so this is the spread a neighbour's noise leaves.
        same = [r for r in v if r in w] if tool != "wrk" else []
        rps_r = [v[r][0] / w[r][0] for r in same]
        us_r = [v[r][1] / w[r][1] for r in same]
        print(f"     {tool:<6} {rps:>10,.0f} req/s  {us:>6.2f} µs CPU/req   "
              f"RPS {rps / wrps:>5.2f}× wrk {spread(rps_r):<11}  CPU/req {us / wus:>5.2f}× wrk {spread(us_r):<11}  "
              f"server {server_us:>5.2f} µs/req, {busy:.2f} cores busy   ({len(v)} rounds)")
PY

if [ "$RATE_S" -gt 0 ]; then
echo "== added latency: /sleep?ms=20 at --rate 2000, -c 100, ${RATE_S}s (medians of $ROUNDS)"
# The server's own time is not 20 ms (tokio's timer rounds a sleep up to
# its next millisecond tick, and a busy machine delays it further), so
# "p99 - 20 ms" charges the server's delay to the generator. Where tcpdump
# runs, each latency run is captured on lo and the server's response times
# are read off the wire (wire_times.py): the generator added its p99 minus
# the wire's p99. Without tcpdump, only p99 - 20 ms is shown.
TCPDUMP=$(command -v tcpdump || true)
[ -n "$TCPDUMP" ] || echo "   (tcpdump not installed: \`apt-get install tcpdump\` adds the wire's times)"
PORT=${ADDR##*:}
LAT=$WORK/latency.tsv
: >"$LAT"
for round in $(seq 1 "$ROUNDS"); do
    for io in uring epoll; do
        o=$WORK/lat-$io-$round
        TD_PID=
        if [ -n "$TCPDUMP" ]; then
            "$TCPDUMP" -i lo -n -s 96 --time-stamp-precision=nano -w "$o.pcap" "tcp port $PORT" 2>"$o.td" &
            TD_PID=$!
            for _ in $(seq 1 100); do grep -q listening "$o.td" && break; sleep 0.05; done
        fi
        timeout $((RATE_S + 30)) "$HARNESS" run "http://$ADDR/sleep?ms=20" -c 100 -d "${RATE_S}s" --rate 2000 \
            --threads "$THREADS" --io "$io" --format json >"$o.json" 2>/dev/null || true
        wire=null
        if [ -n "$TD_PID" ]; then
            kill -INT "$TD_PID" 2>/dev/null || true
            wait "$TD_PID" 2>/dev/null || true
            wire=$(python3 "$ROOT/harness/bench/wire_times.py" "$o.pcap" "$PORT" | jq .p99_us)
            rm -f "$o.pcap"
        fi
        jq -r --arg io "$io" --arg wire "$wire" '[$io, .latency_us.p99, .schedule_lateness_us.p99, .service_us.p99, .requests.failed, $wire] | @tsv' "$o.json" >>"$LAT" || true
    done
done
python3 - "$LAT" <<'PY'
import sys, statistics as st
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
for io in ["uring", "epoll"]:
    v = [(float(a), float(b), float(c), int(d), None if w == "null" else float(w))
         for t, a, b, c, d, w in rows if t == io]
    if not v:
        continue
    p99 = st.median(x[0] for x in v)
    late = st.median(x[1] for x in v)
    svc = st.median(x[2] for x in v)
    failed = sum(x[3] for x in v)
    wires = [x[4] for x in v if x[4] is not None]
    line = f"     {io:<6} p99 {p99 / 1000:.2f} ms (p99 - 20 ms = {(p99 - 20000) / 1000:.2f} ms)"
    if wires:
        added = st.median(x[0] - x[4] for x in v if x[4] is not None)
        line += f"; the wire's p99 {st.median(wires) / 1000:.2f} ms; generator added {added / 1000:.2f} ms at p99"
    line += f"; schedule lateness p99 {late / 1000:.2f} ms; service p99 {svc / 1000:.2f} ms; failed {failed}"
    print(line)
PY
fi

if [ "$HOLD_CONNS" -gt 0 ]; then
    echo "== $HOLD_CONNS connections held open from one process (closed loop /sleep?ms=1000, 6 s): KiB of RSS each"
    for io in uring epoll; do
        o=$WORK/hold-$io
        /usr/bin/time -f '%U %S %M' -o "$o.time" timeout 60 "$HARNESS" run "http://$ADDR/sleep?ms=1000" \
            -c "$HOLD_CONNS" -d 6s --timeout 30s --io "$io" --format json >"$o.json" 2>/dev/null || true
        python3 - "$io" "$(awk '{print $3}' "$o.time")" "$(jq .connections.opened "$o.json")" \
            "$(jq .requests.failed "$o.json")" "$HOLD_CONNS" <<'PY'
import sys
io, rss_kib, opened, failed, c = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])
print(f"     {io:<6} {rss_kib / 1024:>6.1f} MiB peak RSS = {rss_kib / c:.2f} KiB per connection "
      f"({opened} opened, {failed} failed)")
PY
    done
fi
