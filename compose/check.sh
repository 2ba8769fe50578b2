#!/usr/bin/env bash
# CI validation of compose/; all but the last part need no Docker engine:
#   - compose schema: `config -q` on docker-compose.yml, on
#     docker-compose.yml + docker-compose.host.yml, and on both with
#     docker-compose.debian.yml (Compose v2 `docker compose` when present,
#     else Debian's `docker-compose` v1)
#   - structure: check_compose.py (healthchecks, pinned images, host network,
#     cpuset, DB_HOST) and its --self-test (broken copies must be rejected)
#   - php -l on every PHP file, node --check on server.js, bash -n on scripts
#   - JSON/YAML files parse; nginx -t and php-fpm -t on the rendered templates
#     (when nginx and php-fpm are installed)
#   - up-check.sh: the stacks built and brought up on a real Docker engine,
#     verified, compared and brought down (its own checks, counted here as
#     one; skipped without an engine, except under CI=true, where it fails)
# Needs: docker-compose (or docker compose), php-cli, node, python3 + PyYAML.
# Exit status: 0 if every check passed; the last line says "N passed, M failed".
#
# compose/check.sh --official: only the official-image stacks on a real
# engine, as a user with Docker Hub runs them (compose/up-check.sh
# --official: build, up, verify, compare, down, both files); the static
# checks above are CI's.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$HERE" || exit 2
if [ "${1:-}" = --official ]; then
    exec "$HERE/up-check.sh" --official
fi

. "$HERE/../scripts/check-lib.sh"

# --- compose schema
if docker compose version >/dev/null 2>&1; then
    COMPOSE=(docker compose)
elif command -v docker-compose >/dev/null 2>&1; then
    COMPOSE=(docker-compose)
else
    COMPOSE=()
fi
if [ ${#COMPOSE[@]} -eq 0 ]; then
    bad "compose config: neither 'docker compose' nor 'docker-compose' found (apt-get install docker-compose)"
else
    run "${COMPOSE[*]} config (bridge)" "${COMPOSE[@]}" -f docker-compose.yml config -q
    run "${COMPOSE[*]} config (bridge + host)" "${COMPOSE[@]}" -f docker-compose.yml -f docker-compose.host.yml config -q
    run "${COMPOSE[*]} config (bridge + debian)" "${COMPOSE[@]}" -f docker-compose.yml -f docker-compose.debian.yml config -q
    run "${COMPOSE[*]} config (bridge + debian + host)" "${COMPOSE[@]}" -f docker-compose.yml \
        -f docker-compose.debian.yml -f docker-compose.host.yml config -q
fi

# --- structure
if command -v python3 >/dev/null 2>&1; then
    run "check_compose.py" python3 check_compose.py
    run "check_compose.py --self-test" python3 check_compose.py --self-test
    run "JSON parses (package.json, package-lock.json, composer.json)" \
        python3 -c 'import json,sys; [json.load(open(f)) for f in sys.argv[1:]]' \
        node/package.json node/package-lock.json roadrunner/composer.json
    run "YAML parses (roadrunner/.rr.yaml)" python3 -c 'import yaml,sys; yaml.safe_load(open(sys.argv[1]))' roadrunner/.rr.yaml
else
    bad "python3 not found"
fi

# --- code
if command -v php >/dev/null 2>&1; then
    while IFS= read -r f; do
        run "php -l $f" php -l "$f"
    done < <(find . -name '*.php' -not -path '*/vendor/*' -not -path '*/node_modules/*' | sort)
else
    bad "php not found (apt-get install php8.2-cli)"
fi
if command -v node >/dev/null 2>&1; then
    while IFS= read -r f; do
        run "node --check $f" node --check "$f"
    done < <(find . -name '*.js' -not -path '*/node_modules/*' | sort)
else
    bad "node not found"
fi
while IFS= read -r f; do
    run "bash -n $f" bash -n "$f"
done < <(find . -name '*.sh' -not -path '*/node_modules/*' | sort)

# --- rendered php-fpm + nginx configs
if command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ]; then
    tmp=$(mktemp -d)
    run "run-local.sh check (php-fpm -t, nginx -t)" php-fpm/run-local.sh check "$tmp"
    rm -rf "$tmp"
else
    echo "skip run-local.sh check: nginx/php-fpm not installed"
fi

# --- the stacks on a real Docker engine: its lines as they come, its result
# one check here (a run that skipped everything is not counted)
echo "== compose/up-check.sh"
up_log=$(mktemp)
"$HERE/up-check.sh" 2>&1 | tee "$up_log"
up_status=${PIPESTATUS[0]}
up_last=$(tail -n 1 "$up_log")
rm -f "$up_log"
case "$up_status:$up_last" in
    0:*": 0 passed, 0 failed") echo "skip up-check.sh: nothing ran (no Docker engine; see above)" ;;
    0:*) ok "up-check.sh (${up_last#*: })" ;;
    *) bad "up-check.sh exited $up_status (${up_last#*: }; its FAIL lines above)" ;;
esac

summary compose/check.sh
