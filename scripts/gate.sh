#!/usr/bin/env bash
# The main job: set up (see bootstrap.sh), then run the conformance gate on the embedded
# defaults (RocksDB in a temporary directory, Spark in local mode). Extra arguments go to
# `rmqsim gate`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/bootstrap.sh"
cd "$root"
exec .venv/bin/rmqsim gate "$@"
