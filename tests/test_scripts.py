"""The set-up scripts (``scripts/*.sh``, ``.ci/run``) install what each command needs, in
its set-up, saying so, and nothing else: run here in a copy of the repository whose
``apt-get``, ``sudo`` and ``.venv`` are stand-ins that write down how they were called, on
a PATH without Java and Chromium (nothing is installed for real)."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: Real tools the scripts use; everything else on their PATH is a stand-in.
TOOLS = ("bash", "sh", "env", "dirname", "cat", "cut", "sha256sum", "id", "mktemp", "rm",
         "setsid")
#: A stand-in that appends its name, its arguments and RMQSIM_REQUIRE_BROWSER to the log.
STAND_IN = """#!/bin/sh
echo "$(basename "$0") $* [require=${RMQSIM_REQUIRE_BROWSER:-}]" >> "$RMQSIM_TEST_LOG"
"""
#: An ``apt-get`` that cannot install Chromium (a machine without the package, say).
APT_WITHOUT_CHROMIUM = STAND_IN + 'case "$*" in *chromium*) exit 100 ;; esac\n'


def _stand_in(path: Path, text: str = STAND_IN) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A copy of the scripts, with a .venv of stand-ins already set up (bootstrap's stamp
    matches pyproject.toml, so it installs no Python package) and a bin/ of stand-ins."""
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "scripts", repo / "scripts")
    shutil.copytree(ROOT / ".ci", repo / ".ci")
    shutil.copy(ROOT / "pyproject.toml", repo / "pyproject.toml")
    for name in ("python", "ruff", "mypy", "rmqsim"):
        _stand_in(repo / ".venv" / "bin" / name)
    # The drivers' builds (Go, cgo, RocksDB; Java, Maven) stand in too: they log that they ran.
    _stand_in(repo / "scripts" / "build-milvus.sh")
    _stand_in(repo / "scripts" / "build-rocketmq.sh")
    digest = hashlib.sha256((repo / "pyproject.toml").read_bytes()).hexdigest()
    (repo / ".venv" / ".bootstrap-stamp").write_text(digest + "\n")
    bin_dir = tmp_path / "bin"
    for name in ("apt-get", "sudo", "go"):
        _stand_in(bin_dir / name)
    # sudo runs its command after writing itself down, as the real one does.
    (bin_dir / "sudo").write_text(STAND_IN + 'exec "$@"\n')
    for tool in TOOLS:
        real = shutil.which(tool)
        assert real is not None, tool
        (bin_dir / tool).symlink_to(real)
    (bin_dir / "basename").symlink_to(shutil.which("basename") or "/usr/bin/basename")
    return repo


def run(
    repo: Path, command: list[str], **env: str
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """``command`` (a script of ``repo``) with the stand-ins; its result and the log."""
    log = repo.parent / "log"
    log.write_text("")
    environment = {
        "PATH": str(repo.parent / "bin"),
        "HOME": str(repo.parent),
        "RMQSIM_TEST_LOG": str(log),
        **env,
    }
    done = subprocess.run(
        command, cwd=repo, env=environment, capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    return done, log.read_text().splitlines()


def installs(log: list[str]) -> list[str]:
    """The packages apt-get was asked to install, in order."""
    found = []
    for line in log:
        match = re.match(r"apt-get install -y -qq (.*?) \[", line)
        if match:
            found += match.group(1).split()
    return found


def test_gate_installs_java_only_for_spark(repo: Path) -> None:
    """The plain gate needs no Java: on a machine without it, gate.sh no longer stops at
    apt-get; with --spark it installs Java first, and says so."""
    done, log = run(repo, ["./scripts/gate.sh", "--seeds", "0:2"])
    assert done.returncode == 0, done.stderr
    assert installs(log) == [] and not any(line.startswith("apt-get") for line in log)
    assert log[0] == "rmqsim gate --seeds 0:2 [require=]"

    done, log = run(repo, ["./scripts/gate.sh", "--spark", "--seeds", "0:2"])
    assert done.returncode == 0, done.stderr
    assert installs(log) == ["openjdk-17-jre-headless"]
    assert log[-2] == "rmqsim gate --spark --seeds 0:2 [require=]"
    assert "installing Java" in done.stderr


def test_gate_checks_both_backends(repo: Path) -> None:
    """The main job gates the default queue, then the commit-log backend (its outputs
    beside the first's); with --impl, only that one."""
    done, log = run(repo, ["./scripts/gate.sh", "--seeds", "0:2"])
    assert done.returncode == 0, done.stderr
    assert log == [
        "rmqsim gate --seeds 0:2 [require=]",
        "rmqsim gate --seeds 0:2 --impl commitlog --out rmqsim-out/commitlog [require=]",
    ]
    done, log = run(repo, ["./scripts/gate.sh", "--out", "o", "--seeds", "0:2"])
    assert log[-1] == (
        "rmqsim gate --out o --seeds 0:2 --impl commitlog --out o/commitlog [require=]"
    )
    done, log = run(repo, ["./scripts/gate.sh", "--impl", "commitlog-async"])
    assert done.returncode == 0 and log == ["rmqsim gate --impl commitlog-async [require=]"]


@pytest.mark.parametrize(("first_exit", "expected"), [(1, 1), (2, 2), (0, 1)])
def test_gate_exit_status_of_both_backends(repo: Path, first_exit: int, expected: int) -> None:
    """A finding in either gate fails the job; bad usage stops it before the second."""
    second_exit = 1 if first_exit == 0 else 0
    _stand_in(repo / ".venv" / "bin" / "rmqsim", STAND_IN + (
        f'case "$*" in *commitlog*) exit {second_exit} ;; *) exit {first_exit} ;; esac\n'
    ))  # fmt: skip
    done, log = run(repo, ["./scripts/gate.sh"])
    assert done.returncode == expected, done.stderr
    assert len(log) == (1 if first_exit == 2 else 2)


def test_the_test_command_installs_what_the_tests_need_before_pytest_saying_so(
    repo: Path,
) -> None:
    done, log = run(repo, ["./scripts/test.sh", "-q"])
    assert done.returncode == 0, done.stderr
    assert installs(log) == ["openjdk-17-jre-headless", "fuse3", "libfuse3-3", "chromium",
                             "chromium-driver"]
    assert "installing FUSE 3" in done.stderr and "apt-get install fuse3" in done.stderr
    assert log[-3:] == [
        "ruff check . [require=]",
        "mypy --num-workers 2 [require=]",
        "python -m pytest -n 3 --dist loadscope --no-loadscope-reorder -q [require=]",
    ]
    assert "installing Java" in done.stderr
    assert "installing Chromium" in done.stderr and "apt-get install chromium" in done.stderr


def test_the_drivers_build_while_the_venv_is_set_up_their_output_held_until_done(
    repo: Path,
) -> None:
    """The two driver builds start before the set-up's first step and run beside it: here
    bootstrap's first ``apt-get`` waits (up to 10 s) for both builds to have started, and
    fails, failing the set-up, if they have not (as when they start after it). Each build's
    output is printed whole once it is waited for, and a failed one still fails CI."""
    for name in ("milvus", "rocketmq"):
        _stand_in(repo / "scripts" / f"build-{name}.sh", STAND_IN + (
            f'echo "build-{name}: line 1" >&2; sleep 0.2; echo "build-{name}: line 2" >&2\n'
        ))  # fmt: skip
    started = 'grep -q "^build-milvus.sh" "$RMQSIM_TEST_LOG" && grep -q "^build-rocketmq.sh" '
    _stand_in(repo.parent / "bin" / "apt-get", STAND_IN.replace(
        "#!/bin/sh\n", "#!/bin/sh\nn=0\n"
        f'until {started}"$RMQSIM_TEST_LOG"; do\n'
        '  n=$((n + 1)); [ "$n" -lt 200 ] || exit 100; sleep 0.05\ndone\n'
    ))  # fmt: skip
    (repo.parent / "bin" / "grep").symlink_to(shutil.which("grep") or "/usr/bin/grep")
    (repo.parent / "bin" / "sleep").symlink_to(shutil.which("sleep") or "/usr/bin/sleep")
    done, log = run(repo, ["./scripts/test.sh"])
    assert done.returncode == 0, done.stderr
    assert log.index("build-milvus.sh  [require=]") < log.index("ruff check . [require=]")
    for name in ("milvus", "rocketmq"):
        assert f"build-{name}: line 1\nbuild-{name}: line 2\n" in done.stderr
    _stand_in(repo / "scripts" / "build-rocketmq.sh", STAND_IN + 'echo "no maven" >&2; exit 2\n')
    done, log = run(repo, ["./.ci/run"])
    assert done.returncode == 1 and not any("pytest" in line for line in log)
    assert "no maven\ntest.sh: the RocketMQ driver could not be built" in done.stderr


def test_a_failed_set_up_step_ends_the_builds_with_their_children(repo: Path) -> None:
    """Bootstrap fails (here its first ``apt-get``, once both builds have started a child
    of their own, a compiler say): the command fails, and neither build nor its child is
    left running (each build runs in a process group of its own, ended as a whole)."""
    log = repo.parent / "log"
    for name in ("milvus", "rocketmq"):
        _stand_in(repo / "scripts" / f"build-{name}.sh", STAND_IN + (
            f'sleep 60 &\necho $! > "$RMQSIM_TEST_LOG.{name}"\nwait\n'))  # fmt: skip
    _stand_in(repo.parent / "bin" / "apt-get", STAND_IN + (
        'n=0\nuntil [ -s "$RMQSIM_TEST_LOG.milvus" ] && [ -s "$RMQSIM_TEST_LOG.rocketmq" ]; do\n'
        '  n=$((n + 1)); [ "$n" -lt 200 ] || break; sleep 0.05\ndone\nexit 100\n'))  # fmt: skip
    (repo.parent / "bin" / "sleep").symlink_to(shutil.which("sleep") or "/usr/bin/sleep")
    done, _ = run(repo, ["./scripts/test.sh"])
    assert done.returncode != 0
    children = [int(Path(f"{log}.{name}").read_text()) for name in ("milvus", "rocketmq")]
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in children) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(pid) for pid in children), children


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "Z" not in _state(pid)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "Z"


def test_the_test_commands_workers_fail_the_run_on_a_failing_test_and_keep_durations(
    repo: Path,
) -> None:
    """The real pytest behind test.sh's options: two workers, a failing test still fails
    the command (exit 1), and --durations (pyproject's addopts) still prints the slowest."""
    (repo / ".venv" / "bin" / "python").write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    (repo / "tests").mkdir()
    (repo / "tests" / "test_two.py").write_text(
        "def test_passes():\n    pass\n\n\ndef test_fails():\n    assert 1 == 2\n"
    )
    done, _ = run(repo, ["./scripts/test.sh", "-p", "no:cacheprovider"])
    assert done.returncode == 1, done.stdout + done.stderr
    assert "3 workers [2 items]" in done.stdout
    assert "FAILED tests/test_two.py::test_fails" in done.stdout
    assert "slowest 20 durations" in done.stdout
    alone, _ = run(repo, ["./scripts/test.sh", "-k", "passes"], RMQSIM_TEST_WORKERS="0")
    assert alone.returncode == 0, alone.stdout + alone.stderr
    assert "workers [" not in alone.stdout and "1 passed, 1 deselected" in alone.stdout


def test_the_test_command_stops_before_pytest_on_a_type_error(repo: Path) -> None:
    """mypy runs after ruff and before pytest, and a type error fails the command."""
    _stand_in(repo / ".venv" / "bin" / "mypy", STAND_IN + "exit 1\n")
    done, log = run(repo, ["./scripts/test.sh"])
    assert done.returncode == 1
    assert log[-2:] == ["ruff check . [require=]", "mypy --num-workers 2 [require=]"]
    assert not any("pytest" in line for line in log)


def test_without_chromium_the_tests_run_unless_ci_requires_the_browser(repo: Path) -> None:
    _stand_in(repo.parent / "bin" / "apt-get", APT_WITHOUT_CHROMIUM)
    done, log = run(repo, ["./scripts/test.sh"])
    assert done.returncode == 0, done.stderr
    assert log[-1] == "python -m pytest -n 3 --dist loadscope --no-loadscope-reorder [require=]"
    assert "the browser test will be skipped" in done.stderr

    done, log = run(repo, ["./.ci/run"])
    assert done.returncode != 0
    assert not any("pytest" in line for line in log)
    assert "Chromium could not be installed, and RMQSIM_REQUIRE_BROWSER=1" in done.stderr


def test_ci_runs_exactly_the_readme_test_command(repo: Path) -> None:
    """.ci/run is the README's test command (with the browser required), and its set-up is
    the command's own: .ci/run installs nothing itself."""
    readme = (ROOT / "README.md").read_text()
    setup = readme.split("## Set-up", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    [test_command] = [line.split("#")[0].strip() for line in setup.splitlines() if "tests" in line]
    ci = (ROOT / ".ci" / "run").read_text()
    commands = [line.strip() for line in ci.splitlines() if line.strip() and line[0] != "#"]
    assert commands[-1] == f"exec {test_command}"
    assert [c for c in commands if "scripts/" in c] == [f"exec {test_command}"]
    done, log = run(repo, ["./.ci/run"])
    assert done.returncode == 0, done.stderr
    assert installs(log) == ["openjdk-17-jre-headless", "fuse3", "libfuse3-3", "chromium",
                             "chromium-driver"]
    assert "build-milvus.sh  [require=1]" in log  # the Milvus driver is built, and required
    assert "build-rocketmq.sh  [require=1]" in log  # and the RocketMQ store's
    assert log[-1] == "python -m pytest -n 3 --dist loadscope --no-loadscope-reorder [require=1]"


def test_the_tests_require_the_milvus_driver_only_in_ci(repo: Path) -> None:
    """Without Go the test command skips the Milvus tests (saying so); CI stops instead."""
    (repo.parent / "bin" / "go").unlink()
    done, _ = run(repo, ["./scripts/test.sh"])
    assert done.returncode == 0 and "the Milvus driver is not built" in done.stderr
    done, _ = run(repo, ["./scripts/test.sh"], RMQSIM_REQUIRE_MILVUS="1")
    assert done.returncode == 1
    assert "the Milvus driver could not be built, and RMQSIM_REQUIRE_MILVUS=1" in done.stderr


def test_bootstrap_refuses_an_unknown_option(repo: Path) -> None:
    done, _ = run(repo, ["./scripts/bootstrap.sh", "--jvm"])
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "bootstrap: unknown option --jvm (the options are --java, --milvus, --rocketmq and "
        "--fuse)"
    )
    assert os.access(repo / "scripts" / "bootstrap.sh", os.X_OK)


def test_fuse_is_installed_once_and_required_only_in_ci(repo: Path) -> None:
    """FUSE 3 comes with the test command's set-up where fusermount3 is missing, not
    again where it is; where it cannot be installed the tests go on (its tests skip,
    saying why), unless RMQSIM_REQUIRE_FUSE=1 (CI), which stops before pytest."""
    _stand_in(repo.parent / "bin" / "fusermount3")
    done, log = run(repo, ["./scripts/test.sh"])
    assert done.returncode == 0 and "fuse3" not in installs(log)
    (repo.parent / "bin" / "fusermount3").unlink()
    _stand_in(repo.parent / "bin" / "apt-get",
              STAND_IN + 'case "$*" in *fuse3*) exit 100 ;; esac\n')
    done, log = run(repo, ["./scripts/test.sh"])
    assert done.returncode == 0, done.stderr
    assert "FUSE 3 could not be installed: the FUSE tests will be skipped" in done.stderr
    assert log[-1] == "python -m pytest -n 3 --dist loadscope --no-loadscope-reorder [require=]"
    done, log = run(repo, ["./.ci/run"])
    assert done.returncode == 1
    assert "FUSE 3 could not be installed, and RMQSIM_REQUIRE_FUSE=1" in done.stderr
    assert not any("pytest" in line for line in log)
