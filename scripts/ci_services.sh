#!/usr/bin/env bash
# Install and prepare what the curation tests need on a fresh Debian machine (run as root, or with
# sudo available): PostgreSQL server binaries (tests/conftest.py starts its own throw-away cluster
# with initdb + pg_ctl on a free loopback port; Debian's own cluster is neither needed nor touched) and
# Chromium (tests/apps/test_app_browser.py drives /usr/bin/chromium through the playwright pip package,
# which is in the `test` extra; `playwright install` is never run: nothing is downloaded).
# Idempotent. Called by .ci/run before `pip install -e ".[test]"` and pytest.
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi

need=()
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v runuser >/dev/null 2>&1 || need+=(util-linux)
# fonts so that screenshots show text
fc-list 2>/dev/null | grep -qi dejavu || need+=(fonts-dejavu-core)

if [ "${#need[@]}" -gt 0 ]; then
    echo "ci_services: installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
fi

initdb=$(ls /usr/lib/postgresql/*/bin/initdb 2>/dev/null | sort -V | tail -n 1)
echo "ci_services: postgresql: ${initdb:-MISSING}"
echo "ci_services: chromium: $(command -v chromium || echo MISSING) $(chromium --version 2>/dev/null | head -n 1 || true)"
if [ "$(id -u)" -eq 0 ] && ! id postgres >/dev/null 2>&1; then
    echo "ci_services: no postgres user: the tests run their server as it when run as root" >&2
    exit 1
fi
