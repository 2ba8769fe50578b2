#!/usr/bin/env bash
# A 64 KiB `POST /echo`: our engine (`-m POST --body-file`, on each I/O
# backend) against oha (`-m POST -D FILE`) on the same reference server,
# the same -c, threads and duration, in interleaved rounds (the order
# turned each round); medians of the rounds. Per tool: requests per second
# and the generator's own CPU per request (user + system of its process,
# from wait4's rusage via /usr/bin/time), each as a ratio to oha's in the
# same round, with the range of the rounds' ratios; beside them the
# server's CPU per request (/proc/PID/stat).
#
# Not the same work: the engine compares every echoed body byte for byte
# with the one it sent (a response counts only if it matches), while oha
# reads the body and counts the response by its status. The engine's rows
# carry that comparison in their CPU; oha's rows count its 200s.
#
#   harness/bench/post-vs-oha.sh                    # c = 50; 5 rounds of 3 s
#   ROUNDS=3 DURATION=5 CONNS="16 50" harness/bench/post-vs-oha.sh
#
# Environment: ROUNDS (5), DURATION (s, 3), CONNS ("50"), BODY_KIB (64),
# THREADS (the engine's threads, 2; oha runs on its own runtime),
# REF_SERVER (event-loop), SERVER_ARGS ("--workers 2"), BUILD (1; 0: use
# the release binaries already built). Load goes to 127.0.0.1 only;
# everything it starts is stopped by PID; each load is bounded by its
# duration (and `timeout`), so the script ends by itself.
set -euo pipefail

ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-3}
CONNS=${CONNS:-"50"}
BODY_KIB=${BODY_KIB:-64}
THREADS=${THREADS:-2}
REF_SERVER=${REF_SERVER:-event-loop}
SERVER_ARGS=${SERVER_ARGS:-"--workers 2"}
BUILD=${BUILD:-1}
# shellcheck source=harness/bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_init post-vs-oha

need oha "cargo install oha --locked"
need jq "apt-get install jq"
need python3 "apt-get install python3"
need_time

if [ "$BUILD" = 1 ]; then
    build_release "$REF_SERVER"
fi

BODY=$WORK/body.bin
head -c $((BODY_KIB * 1024)) /dev/urandom >"$BODY"

start_ref_server
URL="http://$ADDR/echo"
echo "== $REF_SERVER $SERVER_ARGS at $ADDR (pid $SERVER_PID); POST /echo with ${BODY_KIB} KiB; $ROUNDS rounds of ${DURATION}s per tool and c; $(nproc) cores"
echo "   the engine verifies each echo byte for byte; oha counts 200s and does not look at the body"

RESULTS=$WORK/results.tsv # tool c round ok seconds cpu_s server_cpu_s
: >"$RESULTS"

one() { # TOOL C ROUND
    local tool=$1 c=$2 round=$3 o=$WORK/$1-$2-$3 n= ticks0
    ticks0=$(server_ticks)
    case $tool in
    uring | epoll)
        timed "$o" "$HARNESS" run "$URL" -m POST --body-file "$BODY" -T application/octet-stream \
            -c "$c" -d "${DURATION}s" --threads "$THREADS" --io "$tool" --format json
        n=$(engine_ok "$o" "$tool" "$c")
        ;;
    oha)
        timed "$o" oha -m POST -D "$BODY" -T application/octet-stream -c "$c" -z "${DURATION}s" \
            --no-tui --output-format json "$URL"
        n=$(jq '.statusCodeDistribution."200" // 0' "$o.out" 2>/dev/null || true)
        local other
        other=$(jq '[.statusCodeDistribution | to_entries[] | select(.key != "200") | .value] | add // 0' "$o.out" 2>/dev/null || echo '?')
        [ "$other" = 0 ] || echo "   (oha -c $c: $other answers not 200)"
        ;;
    esac
    record "$tool" "$c" "$round" "$n" "$o" "$ticks0"
}

interleaved_rounds oha uring epoll

echo "== POST /echo, ${BODY_KIB} KiB, medians of $ROUNDS rounds (ratios to oha of the same round; in brackets their range)"
summarize oha uring epoll
