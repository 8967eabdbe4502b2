#!/usr/bin/env bash
# The main job: set up (see bootstrap.sh), then run the conformance gate on the embedded
# defaults (RocksDB in a temporary directory). Extra arguments go to `rmqsim gate`. Java
# is installed (when missing) only for `--spark`: the plain gate does not need it.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
setup=()
for arg in "$@"; do
    if [ "$arg" = "--spark" ]; then
        setup=(--java)
    fi
done
bash "$root/scripts/bootstrap.sh" ${setup[@]+"${setup[@]}"}
cd "$root"
exec .venv/bin/rmqsim gate "$@"
