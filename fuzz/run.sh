#!/usr/bin/env bash
# fuzz/run.sh SECONDS [TARGET...]: builds every fuzz target (or the ones
# named) and runs each for SECONDS with its corpus; exits non-zero if any
# target crashed (its input is left in fuzz/artifacts/TARGET/).
#
# Stable Rust, no cargo-fuzz needed: the targets are built the way
# `cargo fuzz build -s none` builds them (see README.md), with the same
# sanitizer-coverage flags, for the host triple (so build scripts and proc
# macros are not instrumented). Inputs the fuzzer finds go to
# fuzz/work/TARGET (not committed); fuzz/corpus/TARGET holds the seeds.
#
# Environment: FUZZ_PROFILE (release, as cargo fuzz builds, for long runs;
# smoke, the quickest build, for CI), FUZZ_JOBS (cargo -j, default: cargo's),
# FUZZ_TARGET_DIR (the build's target dir, default fuzz/target: never the
# workspace's), FUZZ_BUILD=0 to run what is built.
set -euo pipefail
secs=${1:?usage: fuzz/run.sh SECONDS [TARGET...]}
shift
cd "$(dirname "$0")"
all=(http1_request http1_pipelined chunk_line engine_response mysql_packets hlog results_json)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")

export CARGO_TARGET_DIR=${FUZZ_TARGET_DIR:-$PWD/target}
triple=$(rustc -vV | sed -n 's/^host: //p')
# What cargo-fuzz passes (cargo-fuzz 0.12, `-s none`: no sanitizer; ASan
# needs nightly's -Zsanitizer).
flags=(
  -Cpasses=sancov-module
  -Cllvm-args=-sanitizer-coverage-level=4
  -Cllvm-args=-sanitizer-coverage-inline-8bit-counters
  -Cllvm-args=-sanitizer-coverage-pc-table
  -Cllvm-args=-sanitizer-coverage-trace-compares
  --cfg fuzzing
  -Cdebug-assertions
  -Coverflow-checks
)
profile=${FUZZ_PROFILE:-release}
out=$profile
[ "$profile" != dev ] || out=debug
if [ "${FUZZ_BUILD:-1}" != 0 ]; then
  start=$SECONDS
  jobs=()
  [ -z "${FUZZ_JOBS:-}" ] || jobs=(-j "$FUZZ_JOBS")
  RUSTFLAGS="${flags[*]}" cargo build --profile "$profile" --locked --target "$triple" "${jobs[@]}" \
    $(printf -- '--bin %s ' "${targets[@]}")
  echo "fuzz: built ${#targets[@]} targets ($profile) in $((SECONDS - start)) s"
fi

# Longest input per target: the codec's must pass its 8 KiB head limit.
max_len() {
  case $1 in
    http1_request | http1_pipelined) echo 12000 ;;
    results_json) echo 131072 ;;
    *) echo 8192 ;;
  esac
}

failed=()
for t in "${targets[@]}"; do
  mkdir -p "work/$t" "artifacts/$t" "corpus/$t"
  log="work/$t.log"
  status=0
  "$CARGO_TARGET_DIR/$triple/$out/$t" "work/$t" "corpus/$t" \
    -max_total_time="$secs" -max_len="$(max_len "$t")" -timeout=20 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="artifacts/$t/" >"$log" 2>&1 || status=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  echo "fuzz: $t: ${execs:-?} executions in ${secs} s, exit $status"
  if [ "$status" -ne 0 ]; then
    failed+=("$t")
    grep -E "panicked|ERROR: libFuzzer|SUMMARY|Test unit written" "$log" | head -20 | sed 's/^/  /'
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: crashed: ${failed[*]} (inputs in fuzz/artifacts/; logs in fuzz/work/)"
  exit 1
fi
