"""Where runs keep their SUT's database (conformance.running.scratch)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rmqsim.conformance.running.run import run_seed
from rmqsim.conformance.running.scratch import (
    RAM_DIRS,
    WORKDIR_ENV,
    owned_prefix,
    remove_stale,
    scratch_root,
)


def test_env_var_overrides_the_choice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(WORKDIR_ENV, str(tmp_path))
    assert scratch_root() == tmp_path


def test_default_prefers_a_writable_ram_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(WORKDIR_ENV, raising=False)
    ram = [d for d in RAM_DIRS if os.path.isdir(d) and os.access(d, os.W_OK)]
    if not ram:
        pytest.skip("no RAM-backed directory on this machine")
    assert scratch_root() == Path(ram[0])


def test_a_run_uses_the_scratch_root_and_cleans_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(WORKDIR_ENV, str(tmp_path))
    seen: list[Path] = []

    def factory(**kwargs: object):
        from rmqsim.conformance.adapter import rocksmq_factory

        seen.append(Path(str(kwargs["path"])))
        return rocksmq_factory(**kwargs)  # type: ignore[arg-type]

    factory.rmqsim_layer = "queue"  # type: ignore[attr-defined]  # it takes **kwargs
    result = run_seed("smoke", 0, impl=factory, steps=20)
    assert result.ok
    assert seen and all(tmp_path in p.parents for p in seen)
    assert list(tmp_path.iterdir()) == []  # the run's temporary directory is gone


def _recording_factory(seen: list[Path]) -> Callable[..., Any]:
    """Our queue's factory, noting the path of every database it opens."""
    from rmqsim.conformance.adapter import rocksmq_factory

    def factory(**kwargs: Any) -> Any:
        seen.append(Path(str(kwargs["path"])))
        return rocksmq_factory(**kwargs)

    factory.rmqsim_layer = "queue"  # type: ignore[attr-defined]  # it takes **kwargs
    return factory


def test_consumer_runs_use_the_scratch_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A consumer profile's queue and offset stores live under RMQSIM_WORKDIR too (they
    went to the system's temporary directory). A missing RMQSIM_WORKDIR whose parent
    exists is created."""
    monkeypatch.setenv(WORKDIR_ENV, str(tmp_path / "work"))
    seen: list[Path] = []
    result = run_seed("consumer", 0, impl=_recording_factory(seen), steps=30)
    assert result.ok
    assert seen and all(tmp_path / "work" in p.parents for p in seen), seen
    assert list((tmp_path / "work").iterdir()) == []


def test_fuzz_uses_the_scratch_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``rmqsim fuzz`` opens its databases under RMQSIM_WORKDIR (it ignored the variable)."""
    from rmqsim.conformance.searching.stateful import fuzz

    monkeypatch.setenv(WORKDIR_ENV, str(tmp_path / "work"))
    (tmp_path / "work").mkdir()
    seen: list[Path] = []
    result = fuzz(_recording_factory(seen), profile="dev", examples=3, steps=5, seed=1)
    assert result.failure is None
    assert seen and all(tmp_path / "work" in p.parents for p in seen), seen
    assert list((tmp_path / "work").iterdir()) == []


@pytest.mark.parametrize(
    "args",
    [
        ["run", "--profile", "smoke", "--seed", "0", "--steps", "5"],
        ["gate", "--seeds", "0:1", "--profiles", "smoke", "--steps", "5"],
        ["crash-sweep", "--profile", "smoke", "--steps", "5"],
        ["fuzz", "--profile", "dev", "--examples", "1", "--steps", "2"],
        ["mutants", "--seeds", "0:1", "--only", "lost-write"],
        ["bench", "--messages", "100", "--repeats", "1", "--lockstep-seeds", "0"],
    ],
    ids=lambda args: args[0],
)
def test_a_workdir_whose_parent_is_missing_is_bad_input_for_every_command(
    args: list[str], tmp_path: Path
) -> None:
    """RMQSIM_WORKDIR=/no/such/dir is exit 2 naming it, before anything runs, and nothing
    is created (the whole path was created, and fuzz and bench did not look at it)."""
    from click.testing import CliRunner

    from rmqsim.conformance.cli import cli

    workdir = tmp_path / "missing" / "dir"
    out = ["--out", str(tmp_path / "out")] if args[0] != "bench" else []
    result = CliRunner().invoke(cli, [*args, *out], env={WORKDIR_ENV: str(workdir)})
    assert result.exit_code == 2, result.output
    [line] = result.output.splitlines()
    assert line == (
        f"rmqsim: error: {WORKDIR_ENV}={workdir}: its parent directory {workdir.parent} "
        "does not exist (only the last part of the path is created)"
    )
    assert not workdir.parent.exists()


def _dead_pid() -> int:
    """The id of a process that has ended (and been reaped)."""
    import subprocess
    import sys

    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)  # fmt: skip
    return int(child.stdout)


def test_the_scratch_of_a_killed_run_is_removed_by_the_next_process(tmp_path: Path) -> None:
    """A run whose process is SIGKILLed inside it leaves its directory (nothing in it ran
    its clean-up); the next process's first run in the same root removes it, and leaves
    the directories of live processes, of other hosts and of other names alone."""
    import signal
    import subprocess
    import sys

    script = ("import os, signal, sys\n"
              "from rmqsim.conformance.running.run import run_seed\n"
              "def factory(**kw):\n"
              "    from rmqsim.conformance.adapter import rocksmq_factory\n"
              "    print(kw['path'], flush=True); sys.stdin.readline()\n"
              "    return rocksmq_factory(**kw)\n"
              "factory.rmqsim_layer = 'queue'\n"
              "run_seed('smoke', 0, impl=factory, steps=5)\n")  # fmt: skip
    env = dict(os.environ, **{WORKDIR_ENV: str(tmp_path)})
    child = subprocess.Popen([sys.executable, "-c", script], env=env, text=True,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)  # fmt: skip
    assert child.stdout is not None
    opened = Path(child.stdout.readline().strip())  # the run waits inside its first open
    child.send_signal(signal.SIGKILL)
    child.wait()
    left = tmp_path / opened.relative_to(tmp_path).parts[0]
    assert left.is_dir() and left.name.startswith(f"rmqsim-{child.pid}-")
    host = owned_prefix().split("-")[2]  # rmqsim-<pid>-<host key>-
    dead_pid = _dead_pid()
    live = tmp_path / f"{owned_prefix()}abcdefgh"  # this process's: alive
    elsewhere = tmp_path / f"rmqsim-{dead_pid}-{'0' * 8 if host != '0' * 8 else '1' * 8}-12345678"
    other = tmp_path / "rmqsim-not-a-run"
    for kept in (live, elsewhere, other):
        kept.mkdir()
    stale = tmp_path / f"rmqsim-pool-{dead_pid}-{host}-a1b2c3d4"
    stale.mkdir()
    assert sorted(remove_stale(tmp_path)) == sorted([left, stale])
    assert {p.name for p in tmp_path.iterdir()} == {live.name, elsewhere.name, other.name}


def test_a_run_names_its_scratch_after_its_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(WORKDIR_ENV, str(tmp_path))
    seen: list[Path] = []
    assert run_seed("smoke", 0, impl=_recording_factory(seen), steps=5).ok
    assert seen[0].relative_to(tmp_path).parts[0].startswith(owned_prefix())
