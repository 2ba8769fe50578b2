# Shared by compose/check.sh and deploy/check.sh (sourced): counted checks.
#   ok LABEL / bad LABEL       count a check passed or failed, one line each
#   run LABEL CMD...           run CMD: quiet on success, its output shown on failure
#   summary NAME               "NAME: N passed, M failed"; status 0 iff none failed
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok   $*"; }
bad() { failed=$((failed + 1)); echo "FAIL $*"; }
run() {
    local label=$1 out
    shift
    if out=$("$@" 2>&1); then ok "$label"; else bad "$label"; printf '%s\n' "$out" | sed 's/^/     /'; fi
}
summary() {
    echo "$1: $passed passed, $failed failed"
    [ "$failed" -eq 0 ]
}
