#!/usr/bin/env bash
# The test suite: set up (see bootstrap.sh), lint with ruff, then run pytest.
# Extra arguments go to pytest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/bootstrap.sh"
cd "$root"
.venv/bin/ruff check .
exec .venv/bin/python -m pytest "$@"
