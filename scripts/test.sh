#!/usr/bin/env bash
# The test command (README and .ci/run call this same script): installs everything the suite needs
# on a fresh Debian machine, checks the code with ruff, then runs pytest. Extra arguments go to pytest.
# pytest runs in VHMINE_TEST_WORKERS worker processes (pytest-xdist; default 2, a worker a core: measured on 2 shared
# cores, a third worker ran the suite no faster and spent 7-30% more CPU); `-n 0` runs it in one.
# The inner loop: `bash scripts/test.sh -m "not slow"` (or `python -m pytest -m "not slow" -n 2`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ci_services.sh                       # Debian packages: chromium, postgresql (browser / PostgreSQL tests)
python -m pip install -q -e ".[test]"             # vhmine, its dependencies and the test extra
python -m pip install -q --no-deps "lmms-eval==0.7.3"  # the lmms-eval export test; what it imports is in the test extra
python -m ruff check --quiet .                    # lint: pyflakes, pycodestyle, isort, bugbear, pyupgrade (pyproject.toml)
python -m ruff format --check --quiet .           # the code is as ruff formats it
export HF_HUB_OFFLINE=1                           # tests build tiny models locally; never ask the hub
# vhmine compiled once here: the suite starts a few hundred Python processes that import it (the CLI, the app's
# servers, spawned workers), and where PYTHONDONTWRITEBYTECODE is set, each compiled every module it imported again
# (0.2-0.3 CPU-s a process); compileall writes the .pyc files whatever that says, and imports read them
python -m compileall -q vhmine
exec python -m pytest -n "${VHMINE_TEST_WORKERS:-2}" "$@"   # --dist loadgroup: pyproject.toml's addopts
