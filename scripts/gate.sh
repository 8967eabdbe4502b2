#!/usr/bin/env bash
# The main job: set up (see bootstrap.sh), then run the conformance gate on both backends:
# the embedded default (RocksDB in a temporary directory), then the commit-log backend
# (`--impl commitlog`, whose gate adds a power-loss sweep per profile), its outputs in
# <out>/commitlog. Extra arguments go to both gates; with --impl, only that gate runs.
# Exit status: the first gate's when it is not 0 or 1 (bad usage, an internal error: the
# second is not run), else the first non-zero of the two. Java is installed (when
# missing) only for `--spark`: the plain gate does not need it. `--impl milvus` builds the
# driver of the real Milvus RocksMQ first (bootstrap.sh --milvus), `--impl rocketmq-store`
# the driver of the real RocketMQ store (bootstrap.sh --rocketmq).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
setup=()
out="rmqsim-out"
own_impl=0
previous=""
for arg in "$@"; do
    case "$arg" in
        --spark) setup+=(--java) ;;
        --impl | --impl=*) own_impl=1 ;;
        --out=*) out="${arg#--out=}" ;;
    esac
    if [ "$previous" = "--out" ]; then
        out="$arg"
    fi
    if [ "$arg" = "--impl=milvus" ] || { [ "$previous" = "--impl" ] && [ "$arg" = "milvus" ]; }; then
        setup+=(--milvus)
    fi
    if [ "$arg" = "--impl=rocketmq-store" ] \
            || { [ "$previous" = "--impl" ] && [ "$arg" = "rocketmq-store" ]; }; then
        setup+=(--rocketmq)
    fi
    previous="$arg"
done
bash "$root/scripts/bootstrap.sh" ${setup[@]+"${setup[@]}"}
cd "$root"
if [ "$own_impl" = 1 ]; then
    exec .venv/bin/rmqsim gate "$@"
fi
status=0
.venv/bin/rmqsim gate "$@" || status=$?
if [ "$status" -gt 1 ]; then
    exit "$status"
fi
second=0
.venv/bin/rmqsim gate "$@" --impl commitlog --out "$out/commitlog" || second=$?
if [ "$status" = 0 ]; then
    status=$second
fi
exit "$status"
