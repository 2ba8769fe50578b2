#!/usr/bin/env bash
# HTTP/1.1 pipelining, 16 deep: our engine (`--pipeline 16`, on each I/O
# backend) against wrk with a pipelining Lua script (its `init` builds 16
# concatenated requests, its `request` returns them, as TechEmpower's
# plaintext test does), on the same reference server, the same -c and
# threads and duration, in interleaved rounds (the order turned each round);
# medians of the rounds. Per tool and c: requests per second and the
# generator's own CPU time per request (user + system of its process, from
# wait4's rusage via /usr/bin/time), each as a ratio to wrk's in the same
# round, with the range of the rounds' ratios; beside them the server's CPU
# per request (/proc/PID/stat). The engine verifies every response (status
# and body, in order); wrk counts them.
#
#   harness/bench/pipeline-vs-wrk.sh                       # c = 16, 64; 5 rounds of 3 s
#   ROUNDS=3 DURATION=5 CONNS="64" harness/bench/pipeline-vs-wrk.sh
#
# Environment: ROUNDS (5), DURATION (s, 3), CONNS ("16 64"), DEPTH (16),
# THREADS (the engine's and wrk's threads, 2), REF_SERVER (event-loop),
# SERVER_ARGS ("--workers $(nproc)"), BUILD (1; 0: use the release
# binaries already built). Load goes to 127.0.0.1 only; everything it
# starts is stopped by PID; each load is bounded by its duration (and
# `timeout`), so the script ends by itself.
set -euo pipefail

ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-3}
CONNS=${CONNS:-"16 64"}
DEPTH=${DEPTH:-16}
THREADS=${THREADS:-2}
REF_SERVER=${REF_SERVER:-event-loop}
SERVER_ARGS=${SERVER_ARGS:-"--workers $(nproc)"}
BUILD=${BUILD:-1}
# shellcheck source=harness/bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_init pipeline-vs-wrk

need wrk "apt-get install wrk"
need jq "apt-get install jq"
need python3 "apt-get install python3"
need_time

if [ "$BUILD" = 1 ]; then
    build_release "$REF_SERVER"
fi

start_ref_server
URL="http://$ADDR/hello"
echo "== $REF_SERVER $SERVER_ARGS at $ADDR (pid $SERVER_PID); GET /hello pipelined $DEPTH deep; $ROUNDS rounds of ${DURATION}s per tool and c"

# wrk's pipelining: one write of DEPTH requests, the next once all DEPTH
# responses are in (wrk counts each response).
LUA=$WORK/pipeline.lua
cat >"$LUA" <<LUA
init = function(args)
   local r = {}
   for i = 1, $DEPTH do
      r[i] = wrk.format(nil, "/hello")
   end
   req = table.concat(r)
end
request = function()
   return req
end
LUA

RESULTS=$WORK/results.tsv # tool c round requests seconds cpu_s server_cpu_s
: >"$RESULTS"

one() { # TOOL C ROUND
    local tool=$1 c=$2 round=$3 o=$WORK/$1-$2-$3 n= ticks0
    ticks0=$(server_ticks)
    case $tool in
    wrk)
        timed "$o" wrk -t"$THREADS" -c"$c" -d"${DURATION}s" -s "$LUA" "$URL"
        n=$(awk '/requests in/ {print $1}' "$o.out")
        ;;
    uring | epoll)
        timed "$o" "$HARNESS" run "$URL" -c "$c" -d "${DURATION}s" --threads "$THREADS" --io "$tool" \
            --pipeline "$DEPTH" --format json
        n=$(engine_ok "$o" "$tool" "$c")
        ;;
    esac
    record "$tool" "$c" "$round" "$n" "$o" "$ticks0"
}

interleaved_rounds wrk uring epoll

echo "== pipelined $DEPTH deep, /hello, medians of $ROUNDS rounds (ratios to wrk of the same round; in brackets their range)"
summarize wrk uring epoll
