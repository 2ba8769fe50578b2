#!/usr/bin/env bash
# Renders the load-agent Indexed Job, its merge step and the results volume
# for one run, to stdout (pipe it to `kubectl apply -f -`).
#
#   render.sh --agents N --url URL [-c CONNECTIONS] [-d DURATION] [--rate TOTAL]
#             [--image IMAGE] [--lead SECONDS] [--run ID] [--cpu CPU]
#
#   --agents N        pods, each on its own node where the cluster allows (1..1000)
#   --url URL         the server, as the pods reach it (a Service URL)
#   -c CONNECTIONS    connections per agent (default 64)
#   -d DURATION       how long each agent loads: 30s, 2m, 1h (default 60s)
#   --rate TOTAL      open loop at TOTAL requests/s over all agents: each
#                     agent gets TOTAL/N (harness run's --rate is per agent)
#   --image IMAGE     the harness image (default benchlab/harness:0.1.0,
#                     built from deploy/Dockerfile)
#   --lead SECONDS    the common start is this far ahead, time for every pod
#                     to be scheduled and pull the image (default 60)
#   --run ID          names the Jobs and the results directory (default: UTC
#                     time, e.g. 20261130-231500)
#   --cpu CPU         each agent's CPU request (default 1)
#
# Prints the names of the two Jobs on stderr. Exit status 2 on bad arguments.
set -euo pipefail

usage() { sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
die() { echo "render.sh: $*" >&2; exit 2; }

agents="" url="" connections=64 duration=60s rate="" cpu=1
image="benchlab/harness:0.1.0" lead=60 run=""
while [ $# -gt 0 ]; do
  case "$1" in
    --agents) agents=${2:-}; shift 2 || usage ;;
    --url) url=${2:-}; shift 2 || usage ;;
    -c|--connections) connections=${2:-}; shift 2 || usage ;;
    -d|--duration) duration=${2:-}; shift 2 || usage ;;
    --rate) rate=${2:-}; shift 2 || usage ;;
    --image) image=${2:-}; shift 2 || usage ;;
    --lead) lead=${2:-}; shift 2 || usage ;;
    --run) run=${2:-}; shift 2 || usage ;;
    --cpu) cpu=${2:-}; shift 2 || usage ;;
    -h|--help) usage ;;
    *) die "unknown argument: $1 (see --help)" ;;
  esac
done

is_count() { [[ $1 =~ ^[1-9][0-9]*$ ]]; }
[ -n "$agents" ] || die "--agents N is required"
is_count "$agents" && [ "$agents" -le 1000 ] || die "--agents must be 1..1000, not '$agents'"
[ -n "$url" ] || die "--url URL is required (the server as the pods reach it, e.g. http://app.default.svc:8080/hello)"
[[ $url =~ ^http://[^[:space:]\"\\]+$ ]] || die "--url must be an http:// URL without spaces or quotes, not '$url'"
is_count "$connections" || die "-c must be a positive count, not '$connections'"
is_count "$lead" || die "--lead must be whole seconds > 0, not '$lead'"
[[ $image =~ ^[^[:space:]\"]+:[^[:space:]\"/]+$ ]] && [[ $image != *:latest ]] ||
  die "--image must be pinned by tag (not :latest), not '$image'"
[[ $cpu =~ ^[0-9]+(\.[0-9]+)?m?$ ]] || die "--cpu must be a CPU quantity (1, 500m), not '$cpu'"

# The run's length in whole seconds, for the Jobs' deadlines.
[[ $duration =~ ^([1-9][0-9]*)(s|m|h)$ ]] || die "-d must be whole seconds, minutes or hours (30s, 2m, 1h), not '$duration'"
case "${BASH_REMATCH[2]}" in
  s) secs=${BASH_REMATCH[1]} ;;
  m) secs=$(( BASH_REMATCH[1] * 60 )) ;;
  h) secs=$(( BASH_REMATCH[1] * 3600 )) ;;
esac

agent_args=""
if [ -n "$rate" ]; then
  is_count "$rate" || die "--rate must be a positive whole number of requests/s, not '$rate'"
  share=$(awk -v t="$rate" -v n="$agents" 'BEGIN { printf "%.3f", t / n }')
  agent_args="--rate $share"
fi

[ -n "$run" ] || run=$(date -u +%Y%m%d-%H%M%S)
# Job names are DNS labels: "benchlab-agents-" + run within 63 characters.
[[ $run =~ ^[a-z0-9]([a-z0-9-]{0,44}[a-z0-9])?$ ]] || die "--run must be lowercase letters, digits and '-', at most 46 characters, not '$run'"

start_at=$(( $(date +%s) + lead ))
# Lead, run, and a margin for the last requests, the files and the merge.
deadline=$(( lead + secs + 300 ))

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
render() {
  sed -e "s|\${AGENTS}|$agents|g" -e "s|\${URL}|$url|g" \
      -e "s|\${CONNECTIONS}|$connections|g" -e "s|\${DURATION}|$duration|g" \
      -e "s|\${START_AT}|$start_at|g" -e "s|\${AGENT_ARGS}|$agent_args|g" \
      -e "s|\${IMAGE}|$image|g" -e "s|\${RUN}|$run|g" -e "s|\${CPU}|$cpu|g" \
      -e "s|\${DEADLINE_S}|$deadline|g" "$1"
}
render "$here/results-pvc.yaml.in"
echo "---"
render "$here/agents-job.yaml.in"
echo "---"
render "$here/merge-job.yaml.in"
echo "rendered run $run: job/benchlab-agents-$run ($agents agents from $(date -u -d "@$start_at" +%H:%M:%SZ 2>/dev/null || echo "unix $start_at")), job/benchlab-merge-$run" >&2
