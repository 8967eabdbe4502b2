#!/usr/bin/env bash
# Set up what rmqsim needs on a fresh machine, idempotently:
#   - with --java: Java (for Spark) when `java` is missing, from Debian's packages (apt-get,
#     as root or through sudo: this changes the machine, and says so on stderr);
#   - a virtual environment in .venv with rmqsim and all its dependencies (editable install
#     of .[dev], which includes the spark extra: sweeps, reports and the whole test suite);
#   - with --milvus: the driver of the real Milvus RocksMQ (scripts/build-milvus.sh: needs Go
#     and a C compiler; it says what it fetches), for `rmqsim gate --impl milvus`;
#   - with --rocketmq: the driver of the real RocketMQ store (scripts/build-rocketmq.sh:
#     needs Java 17 and Maven; it says what it fetches), for `rmqsim gate --impl rocketmq-store`;
#   - with --fuse: FUSE 3 (fuse3 and libfuse3-3, Debian's packages, when fusermount3 is
#     missing; saying so on stderr), for power cuts through FUSE (`crash-sweep --storage
#     --through fuse`, their tests). When they cannot be installed it says the FUSE tests
#     will be skipped and goes on; with RMQSIM_REQUIRE_FUSE=1 (CI) it stops (exit 1).
# Re-running is cheap: the install is skipped while pyproject.toml is unchanged.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

want_java=0
want_milvus=0
want_rocketmq=0
want_fuse=0
for arg in "$@"; do
    case "$arg" in
        --java) want_java=1 ;;
        --milvus) want_milvus=1 ;;
        --rocketmq) want_rocketmq=1 ;;
        --fuse) want_fuse=1 ;;
        *) echo "bootstrap: unknown option $arg (the options are --java, --milvus, --rocketmq and --fuse)" >&2
           exit 2 ;;
    esac
done

if [ "$want_java" = 1 ] && ! command -v java >/dev/null 2>&1; then
    echo "bootstrap: installing Java for Spark: apt-get install openjdk-17-jre-headless" \
        "(system packages, with their dependencies)" >&2
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq openjdk-17-jre-headless >/dev/null
fi

if [ "$want_fuse" = 1 ] && ! command -v fusermount3 >/dev/null 2>&1; then
    echo "bootstrap: installing FUSE 3 for power cuts through FUSE: apt-get install fuse3" \
        "libfuse3-3 (system packages)" >&2
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    if ! { $SUDO apt-get update -qq &&
           DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq fuse3 libfuse3-3 >/dev/null; }; then
        if [ -n "${RMQSIM_REQUIRE_FUSE:-}" ]; then
            echo "bootstrap: FUSE 3 could not be installed, and RMQSIM_REQUIRE_FUSE=1" >&2
            exit 1
        fi
        echo "bootstrap: FUSE 3 could not be installed: the FUSE tests will be skipped" >&2
    fi
fi

python="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    echo "bootstrap: creating .venv" >&2
    "$python" -m venv .venv
fi
stamp=".venv/.bootstrap-stamp"
want="$(sha256sum pyproject.toml | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "bootstrap: installing rmqsim and its dependencies into .venv" >&2
    .venv/bin/python -m pip install -q --upgrade pip >/dev/null
    # --no-compile: pip would byte-compile every module of every dependency (pyspark alone
    # holds thousands), about 18 of the install's 45 CPU s; Python compiles what is imported,
    # once, at its first import (where bytecode is written: scripts/test.sh makes sure).
    .venv/bin/python -m pip install -q --no-compile -e '.[dev]'
    echo "$want" > "$stamp"
fi
if [ "$want_milvus" = 1 ]; then
    bash "$root/scripts/build-milvus.sh"
fi
if [ "$want_rocketmq" = 1 ]; then
    bash "$root/scripts/build-rocketmq.sh"
fi
