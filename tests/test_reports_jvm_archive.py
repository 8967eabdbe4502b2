"""The Spark driver JVM's class archive (``reports.jvm_archive``): built once by a JVM of
its own and mapped by the reports after it, the same report either way; a truncated
archive built again, a damaged one dropped with Spark started without it; never an
archive when switched off or when the cache cannot be written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rmqsim.reports.jvm_archive import (
    ARCHIVE_ENV,
    CACHE_ENV,
    archive_path,
    ensure_archive,
    is_complete,
)
from rmqsim.reports.synthetic import write_synthetic

BUILDING = "building the Spark JVM's class archive"


def _report(sweep_dir: Path, cache: Path) -> tuple[dict[str, object], str]:
    """``rmqsim report`` in a process of its own with the archive on, in ``cache``: its
    JSON summary (without the directory) and its stderr."""
    env = dict(os.environ, **{CACHE_ENV: str(cache), ARCHIVE_ENV: "on"})
    command = [sys.executable, "-c", "from rmqsim.conformance.cli import main; main()",
               "report", str(sweep_dir)]  # fmt: skip
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    assert done.returncode in (0, 1), done.stderr[-2000:]
    summary = json.loads((sweep_dir / "report.json").read_text())
    return summary, done.stderr


def test_the_archive_is_built_once_then_mapped_and_a_damaged_one_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sweep_dir = write_synthetic(tmp_path / "sweep", 1000)
    cache = tmp_path / "cache"
    monkeypatch.setenv(CACHE_ENV, str(cache))
    monkeypatch.setenv(ARCHIVE_ENV, "on")
    path = archive_path()
    assert path is not None and path.parent == cache

    built, stderr = _report(sweep_dir, cache)
    assert BUILDING in stderr and is_complete(path)
    assert not list(cache.glob("*.part"))  # the dump renamed into place once complete
    mapped, stderr = _report(sweep_dir, cache)
    assert BUILDING not in stderr and mapped == built

    # Truncated (a full disk, a partial copy): its size is not the one recorded, so it is
    # built again rather than mapped (a JVM mapping it dies of SIGBUS).
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) // 2])
    again, stderr = _report(sweep_dir, cache)
    assert BUILDING in stderr and is_complete(path) and again == built

    # Damaged in a way the size does not show: the JVM cannot start with it; Spark starts
    # without it and the archive is removed (to be built again by the next report).
    path.write_bytes(whole[: len(whole) // 2])
    path.with_name(path.name + ".bytes").write_text(f"{len(whole) // 2}\n")
    survived, _ = _report(sweep_dir, cache)
    assert survived == built and not path.exists()
    assert not list(Path.cwd().glob("hs_err_pid*.log"))


def test_no_archive_when_switched_off_or_when_the_cache_cannot_be_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    for off in ("off", "0", "no", "false", "OFF"):
        monkeypatch.setenv(ARCHIVE_ENV, off)
        assert archive_path() is None
    monkeypatch.setenv(ARCHIVE_ENV, "on")
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    monkeypatch.setenv(CACHE_ENV, str(blocker / "cache"))
    path = archive_path()
    assert path is not None
    assert ensure_archive(path, {}) is False  # no build attempted, no error
    assert blocker.read_text() == "not a directory\n"
    # Spark splits the JVM's options at whitespace: no archive under such a path.
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "my cache"))
    assert archive_path() is None


def test_a_java_that_could_not_build_an_archive_is_not_asked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv(ARCHIVE_ENV, "on")
    path = archive_path()
    assert path is not None
    path.parent.mkdir(parents=True)
    path.with_name(path.name + ".failed").write_text("Unrecognized VM option\n")
    # A build would take seconds and print that it builds; the recorded failure stops it.
    assert ensure_archive(path, {"spark.master": "local[1]"}) is False
    assert not path.exists()
