#!/usr/bin/env bash
# Set up what rmqsim needs on a fresh machine, idempotently:
#   - with --java: Java (for Spark) when `java` is missing, from Debian's packages (apt-get,
#     as root or through sudo: this changes the machine, and says so on stderr);
#   - a virtual environment in .venv with rmqsim and all its dependencies (editable install
#     of .[dev], which includes the spark extra: sweeps, reports and the whole test suite);
#   - with --milvus: the driver of the real Milvus RocksMQ (scripts/build-milvus.sh: needs Go
#     and a C compiler; it says what it fetches), for `rmqsim gate --impl milvus`;
#   - with --rocketmq: the driver of the real RocketMQ store (scripts/build-rocketmq.sh:
#     needs Java 17 and Maven; it says what it fetches), for `rmqsim gate --impl rocketmq-store`.
# Re-running is cheap: the install is skipped while pyproject.toml is unchanged.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

want_java=0
want_milvus=0
want_rocketmq=0
for arg in "$@"; do
    case "$arg" in
        --java) want_java=1 ;;
        --milvus) want_milvus=1 ;;
        --rocketmq) want_rocketmq=1 ;;
        *) echo "bootstrap: unknown option $arg (the options are --java, --milvus and --rocketmq)" >&2
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
    .venv/bin/python -m pip install -q -e '.[dev]'
    echo "$want" > "$stamp"
fi
if [ "$want_milvus" = 1 ]; then
    bash "$root/scripts/build-milvus.sh"
fi
if [ "$want_rocketmq" = 1 ]; then
    bash "$root/scripts/build-rocketmq.sh"
fi
