#!/usr/bin/env bash
# `harness run https://` against wrk (OpenSSL, keep-alive) and ab (OpenSSL,
# a connection per request) on the same reference server over the same
# lab certificate (`harness certs`), in interleaved rounds; medians of the
# rounds. Per row: requests per second and the generator's own CPU per
# request (user + system of its process, /usr/bin/time), each as a ratio
# to the reference tool's, with the range of the rounds' ratios; beside
# them the server's CPU per request (/proc/PID/stat).
#
#   keep-alive, -c C:      wrk | harness uring | harness epoll
#   a connection per request, -c 1 per thread:
#                          ab (full handshakes) | harness --tls-no-resume |
#                          harness (resumed after each thread's first)
#   oha (rustls, like the engine), where it is installed (`cargo install
#   oha`): a keep-alive row beside wrk's, and a connection-per-request row
#   that the engine's handshake rows are also set against.
#
#   harness/bench/tls-vs-wrk.sh                 # 3 rounds of 3 s, c = 50
#   ROUNDS=5 DURATION=5 CONNS=100 harness/bench/tls-vs-wrk.sh
#
# Environment: ROUNDS (3), DURATION (s, 3), CONNS (50), THREADS (2),
# REF_SERVER (event-loop), SERVER_ARGS ("--workers $(nproc)"). Load goes to
# 127.0.0.1 only; everything started is stopped by PID; every load is
# bounded by its duration (and `timeout`).
set -euo pipefail

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-3}
CONNS=${CONNS:-50}
THREADS=${THREADS:-2}
REF_SERVER=${REF_SERVER:-event-loop}
SERVER_ARGS=${SERVER_ARGS:-"--workers $(nproc)"}
# shellcheck source=harness/bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_init tls-vs-wrk

need wrk "apt-get install wrk"
need jq "apt-get install jq"
need python3 "apt-get install python3"
need_time
AB=$(command -v ab || true)
[ -n "$AB" ] || echo "(ab not installed: \`apt-get install apache2-utils\` adds its rows)"
OHA=$(command -v oha || true)
[ -n "$OHA" ] || echo "(oha not installed: \`cargo install oha\` adds its rows)"

build_release "$REF_SERVER"
"$HARNESS" certs "$WORK/certs" >/dev/null

start_ref_server --tls-cert "$WORK/certs/cert.pem" --tls-key "$WORK/certs/key.pem"
URL="https://$ADDR/hello"
CA=$WORK/certs/ca.pem
echo "== $REF_SERVER $SERVER_ARGS over TLS at $ADDR (pid $SERVER_PID); $ROUNDS rounds of ${DURATION}s; $(nproc) cores"

RESULTS=$WORK/results.tsv # tool round ok seconds cpu_s server_cpu_s handshakes
: >"$RESULTS"

one() { # TOOL ROUND
    local tool=$1 round=$2 o=$WORK/$1-$2 n= secs=$DURATION hs=0 ticks0
    ticks0=$(server_ticks)
    case $tool in
    wrk)
        timed "$o" wrk -t"$THREADS" -c"$CONNS" -d"${DURATION}s" "$URL"
        n=$(awk '/requests in/ {print $1}' "$o.out")
        ;;
    uring | epoll)
        timed "$o" "$HARNESS" run "$URL" --cacert "$CA" -c "$CONNS" -d "${DURATION}s" --threads "$THREADS" --io "$tool" --format json
        n=$(jq '.requests.ok' "$o.out" 2>/dev/null || true)
        ;;
    ab)
        # ab has no duration: as many requests as harness-full did this round.
        local count
        count=$(awk -F'\t' -v r="$round" '$1 == "full" && $2 == r {print $3}' "$RESULTS")
        count=${count:-2000}
        timed "$o" "$AB" -q -n "$count" -c "$THREADS" "$URL"
        n=$(awk '/^Complete requests:/ {c = $3} /^Failed requests:/ {f = $3} END {print c - f}' "$o.out")
        secs=$(awk '/^Time taken for tests:/ {print $5}' "$o.out")
        hs=$n
        ;;
    oha | oha-close)
        # oha's JSON counts answers by status; only 200s are successes here.
        local oha_c=$CONNS keep=
        [ "$tool" = oha-close ] && oha_c=$THREADS keep=--disable-keepalive
        timed "$o" "$OHA" "$URL" --cacert "$CA" -c "$oha_c" -z "${DURATION}s" $keep --no-tui --output-format json
        n=$(jq '.statusCodeDistribution."200" // 0' "$o.out" 2>/dev/null || true)
        [ "$tool" = oha-close ] && hs=$n
        ;;
    full | resumed)
        local resume=
        [ "$tool" = full ] && resume=--tls-no-resume
        timed "$o" "$HARNESS" run "$URL" --cacert "$CA" -c "$THREADS" -d "${DURATION}s" --threads "$THREADS" --no-keepalive $resume --format json
        n=$(jq '.requests.ok' "$o.out" 2>/dev/null || true)
        hs=$(jq '.tls.handshakes_full + .tls.handshakes_resumed' "$o.out" 2>/dev/null || echo 0)
        ;;
    esac
    [ -n "$n" ] && [ "$n" != null ] || { echo "   $tool round $round: no result ($(tail -1 "$o.err"))"; return; }
    local server_cpu
    server_cpu=$(awk -v a="$ticks0" -v b="$(server_ticks)" -v hz="$CLK_TCK" 'BEGIN {print (b - a) / hz}')
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$tool" "$round" "$n" "$secs" \
        "$(cpu_of "$o")" "$server_cpu" "$hs" >>"$RESULTS"
}

for round in $(seq 1 "$ROUNDS"); do
    # Interleaved, the order turned each round.
    for tool in $(echo wrk uring epoll | tr ' ' '\n' | awk -v r="$round" '{a[NR]=$0} END {for (i = 0; i < NR; i++) print a[(i + r) % NR + 1]}'); do
        one "$tool" "$round"
    done
    [ -n "$OHA" ] && one oha "$round"
    for tool in full resumed; do one "$tool" "$round"; done
    [ -n "$AB" ] && one ab "$round"
    [ -n "$OHA" ] && one oha-close "$round"
    echo "   round $round done"
done

python3 - "$RESULTS" "$CONNS" <<'PY'
import sys, statistics as st
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
cells = {}
for tool, rnd, n, secs, cpu, server_cpu, hs in rows:
    n, secs, cpu, server_cpu = int(float(n)), float(secs), float(cpu), float(server_cpu)
    cells.setdefault(tool, {})[rnd] = (n / secs, cpu * 1e6 / max(n, 1), server_cpu * 1e6 / max(n, 1))
def spread(xs):
    return f"({min(xs):.2f}–{max(xs):.2f})" if len(xs) > 1 else ""
def table(title, ref, tools, unit):
    print(title)
    base = cells.get(ref, {})
    for tool in tools:
        v = cells.get(tool)
        if not v:
            continue
        rps = st.median(x[0] for x in v.values())
        us = st.median(x[1] for x in v.values())
        server_us = st.median(x[2] for x in v.values())
        same = [r for r in v if r in base] if tool != ref else []
        line = f"     {tool:<8} {rps:>9,.0f} {unit}  {us:>7.1f} µs CPU each   server {server_us:>6.1f} µs each"
        if base and tool != ref:
            brps = st.median(x[0] for x in base.values())
            bus = st.median(x[1] for x in base.values())
            line += (f"   rate {rps / brps:.2f}× {ref} {spread([v[r][0] / base[r][0] for r in same])}"
                     f"  CPU {us / bus:.2f}× {ref} {spread([v[r][1] / base[r][1] for r in same])}")
        print(line + f"   ({len(v)} rounds)")
table(f"== keep-alive, -c {sys.argv[2]}: requests (medians; ratios to wrk, range of the rounds')", "wrk",
      ["wrk", "uring", "epoll", "oha"], "req/s")
table("== a connection (and handshake) per request: handshakes (ratios to ab's full handshakes)", "ab",
      ["ab", "full", "resumed"], "hs/s ")
table("== a connection (and handshake) per request: handshakes (ratios to oha's; CPU each is the inverse of handshakes per generator core)",
      "oha-close", ["oha-close", "full", "resumed"], "hs/s ")
PY
