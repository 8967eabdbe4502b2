"""A full (or read-only, or failing) output disk is the machine's state, not an internal
error of rmqsim (issue 39, item 8): ``run`` and ``gate`` say what could not be written and
keep the run's verdict (exit 1 for a divergence; exit 2 when everything conformed but an
asked-for output is missing), never exit 3."""

from __future__ import annotations

import errno
import os
import pathlib
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from rmqsim.conformance.adapter import make_model_factory
from rmqsim.conformance.cli import cli
from tests.wrong_models import LostWrite

lost_write_factory = make_model_factory(LostWrite)


@pytest.fixture
def full_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory whose every write finds the disk full (the rest of the machine is fine)."""
    full = tmp_path / "full"
    full.mkdir()
    for name in ("write_text", "write_bytes"):
        original = getattr(pathlib.Path, name)

        def refusing(self: Path, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            if str(self).startswith(str(full) + os.sep):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(pathlib.Path, name, refusing)
    return full


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args))


def _said_not_written(output: str) -> None:
    assert "internal error" not in output and "Traceback" not in output, output
    assert "could not write" in output and "No space left on device" in output, output


def test_run_out_on_a_full_disk_keeps_the_divergence(full_disk: Path) -> None:
    done = _invoke("run", "--profile", "smoke", "--seed", "0", "--impl",
                   f"{__name__}:lost_write_factory", "--out", str(full_disk / "out"))
    assert done.exit_code == 1, done.output
    _said_not_written(done.output)
    assert not list((full_disk / "out").glob("*.tmp"))  # no half-written trace left


def test_run_trace_on_a_full_disk_says_so_and_exits_2(full_disk: Path, tmp_path: Path) -> None:
    done = _invoke("run", "--profile", "smoke", "--seed", "0", "--trace",
                   str(full_disk / "run.jsonl"), "--out", str(tmp_path / "out"))
    assert done.exit_code == 2, done.output
    _said_not_written(done.output)


@pytest.mark.parametrize(("impl", "verdict"), [(None, 2), ("lost_write_factory", 1)])
def test_gate_out_on_a_full_disk_keeps_the_verdict(full_disk: Path, impl: str | None,
                                                   verdict: int) -> None:
    extra = ["--impl", f"{__name__}:{impl}"] if impl else []
    done = _invoke("gate", "--profiles", "smoke", "--seeds", "0:1", "--no-crash-sweep",
                   "--no-power-loss", "--jobs", "1", "--out", str(full_disk / "gate"), *extra)
    assert done.exit_code == verdict, done.output
    _said_not_written(done.output)


def test_a_shrunk_trace_that_cannot_be_written_keeps_the_divergence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The failing trace fits, its shrunk trace finds the disk full."""
    original = pathlib.Path.write_text

    def refusing(self: Path, *args: Any, **kwargs: Any) -> Any:
        if self.name.endswith(".shrunk.jsonl.tmp"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "write_text", refusing)
    out = tmp_path / "out"
    done = _invoke("run", "--profile", "smoke", "--seed", "0", "--impl",
                   f"{__name__}:lost_write_factory", "--out", str(out))
    assert done.exit_code == 1, done.output
    _said_not_written(done.output)
    assert [path.name for path in out.iterdir()] == ["smoke-seed0-lost-write.jsonl"]
