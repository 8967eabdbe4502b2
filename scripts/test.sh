#!/usr/bin/env bash
# The test suite: set up, lint with ruff, check the types with mypy (its configuration is
# pyproject.toml's [tool.mypy]), then run pytest. Extra arguments go to pytest; a finding of
# ruff or mypy stops it before pytest.
#
# The set-up installs what the tests need before any test starts, and says so on stderr:
# the venv, Java for the Spark tests and FUSE 3 for power cuts through FUSE (bootstrap.sh
# --java --fuse; without FUSE those tests are skipped, saying why, unless
# RMQSIM_REQUIRE_FUSE=1, as in CI), and Chromium with its
# WebDriver for the report page's browser test (install-chromium.sh; Debian packages through
# apt-get, as root or with sudo). No test installs anything. When Chromium cannot be
# installed, the browser test is skipped, unless RMQSIM_REQUIRE_BROWSER=1 (CI): then the
# set-up stops here. When Go is present, the set-up also builds the driver of the real
# Milvus RocksMQ (scripts/build-milvus.sh); with Java and Maven, the driver of the real
# RocketMQ store (scripts/build-rocketmq.sh). The two builds run while the venv is set up,
# their output printed once each is done.
#
# pytest runs on two computing worker processes (pytest-xdist; RMQSIM_TEST_WORKERS=N for
# another count, 0 for none) and one more, the waiting lane (RMQSIM_TEST_LANE=1,
# tests/lanes.py), which runs the test files that mostly wait (bounds, Ctrl-Z, last
# resorts) beside them; the computing workers run at a lower priority, so that the waiting
# tests' bounds hold. --dist loadscope --no-loadscope-reorder: a test file is one unit of
# work, run whole by one worker (its module-scoped fixtures, a Spark session, an installed
# wheel, a shared gate, set up once), the units handed out in collection order
# (tests/conftest.py puts the slowest first) to whichever worker is nearly out of work, so
# the run ends on short files.
#
# --quick (first argument): a development run of about two minutes. The set-up, ruff and mypy
# as always; pytest leaves out the tests that take a second or more
# (tests/slow_tests.txt, written by tests/slow_list.py from a full run) and those marked
# slow. It is not the test command: CI runs the whole suite.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# When the command started, and the machine's busy and stolen CPU seconds then: pytest's
# controller ends the run with the command's wall time, the machine's CPU over it, this
# machine's speed and the target's verdict (tests/run_time.py).
RMQSIM_TEST_STARTED_S="${EPOCHREALTIME:-$(printf '%(%s)T' -1)}"
RMQSIM_TEST_STARTED_CPU=""
if [ -r /proc/stat ]; then # busy (user nice system irq softirq) and stolen, in 1/100 s
    read -r _ user nice system _ _ irq softirq steal _ </proc/stat
    RMQSIM_TEST_STARTED_CPU="$((user + nice + system + irq + softirq)) $steal"
fi
export RMQSIM_TEST_STARTED_S RMQSIM_TEST_STARTED_CPU
quick=()
target_s=360 # issue 41: the whole suite in <= 6 min on a quiet 2-core machine
if [ "${1:-}" = "--quick" ]; then
    shift
    quick=(--quick)
    target_s=120 # and --quick in <= 2 min
fi
if [ "$#" -eq 0 ]; then # a target is for the whole command, not a run of chosen tests
    export RMQSIM_TEST_TARGET_S="$target_s"
fi
# The drivers of the real systems build while the venv is set up (neither needs it; pip
# keeps one core busy, a build the other): their output is held and printed, in one piece,
# where they are waited for, below.
builds="$(mktemp -d)"
milvus_pid=""
rocketmq_pid=""
# Each build in a process group of its own (setsid, where there is one), so that a set-up
# step that fails ends the build with its compilers and JVMs; no held output is left.
trap 'for pid in $milvus_pid $rocketmq_pid; do kill -- "-$pid" "$pid" 2>/dev/null; done
      rm -rf "$builds"' EXIT
group=()
if command -v setsid >/dev/null 2>&1; then
    group=(setsid)
fi
if command -v go >/dev/null 2>&1; then
    ${group[@]+"${group[@]}"} bash "$root/scripts/build-milvus.sh" >"$builds/milvus" 2>&1 &
    milvus_pid=$!
fi
${group[@]+"${group[@]}"} bash "$root/scripts/build-rocketmq.sh" >"$builds/rocketmq" 2>&1 &
rocketmq_pid=$!
bash "$root/scripts/bootstrap.sh" --java --fuse
if ! bash "$root/scripts/install-chromium.sh"; then
    if [ -n "${RMQSIM_REQUIRE_BROWSER:-}" ]; then
        echo "test.sh: Chromium could not be installed, and RMQSIM_REQUIRE_BROWSER=1" >&2
        exit 1
    fi
    echo "test.sh: Chromium could not be installed: the browser test will be skipped" >&2
fi
# A build's exit status, its output printed first.
built() {
    local status=0
    wait "$2" || status=$?
    cat "$builds/$1" >&2
    return "$status"
}
# The real Milvus RocksMQ's driver (impl/external/milvus_rocksmq/), when Go is here: its
# tests skip, with the reason, when it is not built, unless RMQSIM_REQUIRE_MILVUS=1 (CI).
if [ -n "$milvus_pid" ] && built milvus "$milvus_pid"; then
    :
elif [ -n "${RMQSIM_REQUIRE_MILVUS:-}" ]; then
    echo "test.sh: the Milvus driver could not be built, and RMQSIM_REQUIRE_MILVUS=1" >&2
    exit 1
else
    echo "test.sh: the Milvus driver is not built (no Go, or its build failed above):" \
        "its tests will be skipped" >&2
fi
# The real RocketMQ store's driver (impl/external/rocketmq_store/), when Java and Maven are
# here: its tests skip, with the reason, when it is not built, unless
# RMQSIM_REQUIRE_ROCKETMQ=1 (CI).
# (The build script itself says, in one line, when Java or Maven is missing.)
if built rocketmq "$rocketmq_pid"; then
    :
elif [ -n "${RMQSIM_REQUIRE_ROCKETMQ:-}" ]; then
    echo "test.sh: the RocketMQ driver could not be built, and RMQSIM_REQUIRE_ROCKETMQ=1" >&2
    exit 1
else
    echo "test.sh: the RocketMQ driver is not built (no Java or Maven, or its build failed" \
        "above): its tests will be skipped" >&2
fi
trap - EXIT
rm -rf "$builds"
cd "$root"
# Bytecode is cached (in __pycache__/, git-ignored), as Python does by default: an
# environment that sets PYTHONDONTWRITEBYTECODE=1 (this workplace's machines do) would make
# each xdist worker rewrite every test module's asserts again (about 7 CPU s each) and every
# rmqsim process the tests start compile rmqsim's modules again (about 0.25 CPU s each).
unset PYTHONDONTWRITEBYTECODE
.venv/bin/ruff check .
# Two mypy workers: 9 s instead of 13 on 2 cores, from a clean checkout.
.venv/bin/mypy --num-workers 2
workers="${RMQSIM_TEST_WORKERS:-2}"
if [ "$workers" -gt 0 ]; then
    workers=$((workers + 1))
    export RMQSIM_TEST_LANE=1
fi
exec .venv/bin/python -m pytest -n "$workers" --dist loadscope --no-loadscope-reorder \
    ${quick[@]+"${quick[@]}"} "$@"
