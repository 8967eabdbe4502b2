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
    BUILD_TIMEOUT_S,
    CACHE_ENV,
    DRIVER_JAVA_OPTIONS,
    archive_path,
    build_archive,
    ensure_archive,
    is_complete,
    remove_stale_dumps,
)
from rmqsim.reports.spark import class_archive
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
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep_dir = write_synthetic(tmp_path / "sweep", 1000)
    cache = tmp_path / "cache"
    monkeypatch.setenv(CACHE_ENV, str(cache))
    monkeypatch.setenv(ARCHIVE_ENV, "on")
    path = archive_path()
    assert path is not None and path.parent == cache

    # Built by the first report (a JVM of its own), then mapped by that report's JVM.
    built, stderr = _report(sweep_dir, cache)
    assert BUILDING in stderr and is_complete(path)
    assert not list(cache.glob("*.part"))  # the dump renamed into place once complete

    # Truncated (a full disk, a partial copy): its size is not the one recorded, so it is
    # built again rather than mapped (a JVM mapping it dies of SIGBUS). Asked of the
    # report's own entry (``class_archive``, what ``_report`` started from above) in this
    # process, with the builder's process stood in for: that a build makes a complete
    # archive the report maps is the first report's (above); here, that the truncated one
    # is removed and a build started, and that nothing is mapped when the build fails.
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) // 2])
    assert not is_complete(path)
    builds: list[list[str]] = []

    def build_times_out(command: list[str], **kwargs: object) -> None:
        builds.append(command)
        raise subprocess.TimeoutExpired(command, BUILD_TIMEOUT_S)

    capsys.readouterr()
    with monkeypatch.context() as patch:
        patch.setattr(subprocess, "run", build_times_out)
        assert class_archive() is None
    assert [command[1:4] for command in builds] == [["-m", "rmqsim.reports.jvm_archive",
                                                     str(path)]]  # fmt: skip
    assert BUILDING in capsys.readouterr().err and not path.exists()

    # Damaged in a way the size does not show: an archive of the recorded size is not
    # built again (the next report maps it), the JVM cannot start with it; Spark starts
    # without it, the same report as the one that mapped the archive, and the archive is
    # removed (to be built again by the next report). (A second report mapping the good
    # archive, once run between the first and this one, showed nothing these two do not:
    # "not built again" is asked here, "the same report" of a start without the archive.)
    path.write_bytes(whole[: len(whole) // 2])
    path.with_name(path.name + ".bytes").write_text(f"{len(whole) // 2}\n")
    survived, stderr = _report(sweep_dir, cache)
    assert BUILDING not in stderr
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


def test_partial_dumps_of_builds_that_never_finished_are_removed_once_old(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A build killed or timed out leaves ``<archive>.<pid>.part`` (its JVM may write it
    after its parent is gone): a later start removes those older than two build time
    limits, keeps a younger one (a build running now) and everything else."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv(ARCHIVE_ENV, "on")
    path = archive_path()
    assert path is not None
    path.parent.mkdir(parents=True)
    now_s = 1_000_000.0
    old, young = path.with_name(f"{path.name}.11.part"), path.with_name(f"{path.name}.12.part")
    old_size = path.with_name(f"{path.name}.bytes.11.part")
    kept = [young, path.with_name(path.name + ".failed"), tmp_path / "cache" / "other.part"]
    for file in (old, old_size, *kept):
        file.write_text("x")
    for file in (old, old_size):
        os.utime(file, (now_s - 2 * BUILD_TIMEOUT_S - 1,) * 2)
    for file in kept:
        os.utime(file, (now_s - 2 * BUILD_TIMEOUT_S + 1,) * 2)
    assert remove_stale_dumps(path, now_s) == sorted([old, old_size])
    assert all(file.exists() for file in kept) and not old.exists() and not old_size.exists()
    os.utime(young, (0, 0))  # ensure_archive ages them by the clock, even after a failure
    assert ensure_archive(path, {"spark.master": "local[1]"}) is False
    assert not young.exists()


def test_a_build_that_fails_leaves_no_partial_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gateway's JVM wrote its dump, then the build failed (here: the start of the
    gateway, faked to fail after the JVM's dump): no ``.part`` stays in the cache."""
    import pyspark.java_gateway

    path = tmp_path / "cache" / "spark.jsa"
    path.parent.mkdir()

    def failing_gateway(conf: object) -> object:
        options = str(conf.get(DRIVER_JAVA_OPTIONS))  # type: ignore[attr-defined]
        dump = options.split("-XX:ArchiveClassesAtExit=")[1].split()[0]
        Path(dump).write_bytes(b"half an archive")
        raise RuntimeError("the JVM died")

    monkeypatch.setattr(pyspark.java_gateway, "launch_gateway", failing_gateway)
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)  # build_archive sets it
    with pytest.raises(RuntimeError, match="the JVM died"):
        build_archive(path, {"spark.master": "local[1]"})
    assert list(path.parent.iterdir()) == []
