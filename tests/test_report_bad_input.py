"""``rmqsim report`` on bad input: one line naming the culprit, exit 2, and no Spark.

Every case here is refused before Spark starts, so none of them starts it: the sweep
directory is written by pyarrow alone (``reports.synthetic``), and the tests that go through
the command check that Spark was never asked for. (The one bad input only Spark can see,
damage in the middle of a file, is tested with the shared session in
``test_reports_spark.py``.)
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from rmqsim.conformance.cli import cli
from rmqsim.conformance.cli.clock import INTERVAL_ENV
from rmqsim.conformance.cli.common import UsageError
from rmqsim.reports.schema import RUNS_DIR
from rmqsim.reports.synthetic import write_synthetic

ROOT = Path(__file__).resolve().parent.parent
#: What stands for Spark in these tests: reaching it means a check came too late.
SPARK_REACHED = "the test's stand-in for Spark was started"


@pytest.fixture
def sweep_dir(tmp_path: Path) -> Path:
    """A small, valid sweep directory (one Parquet file), written without Spark."""
    return write_synthetic(tmp_path / "sweep", rows=50)


@pytest.fixture
def no_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    """Starting Spark fails with a recognisable usage error (the command imports
    ``spark_session`` or ``spark_context`` when it runs, so the stand-in is what it
    gets)."""
    from rmqsim.reports import spark as spark_module

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise UsageError(SPARK_REACHED)

    monkeypatch.setattr(spark_module, "spark_session", refuse)
    monkeypatch.setattr(spark_module, "spark_context", refuse)


def report(*args: object) -> subprocess.CompletedProcess[str]:
    """``rmqsim report`` in a process of its own: stderr then holds what the JVM would print
    too, which an in-process runner does not see. Its heartbeat (a line after 15 s without
    one) is put off for an hour: on a loaded machine it would be a second line of stderr
    that the one-line checks here are not about."""
    code = "from rmqsim.conformance.cli import main; main()"
    command = [sys.executable, "-c", code, "report", *map(str, args)]
    env = dict(os.environ, **{INTERVAL_ENV: "3600"})
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)


def test_a_file_given_as_sweep_dir_is_named_as_a_file(tmp_path: Path, no_spark: None) -> None:
    regular = tmp_path / "report.json"
    regular.write_text("{}")
    result = CliRunner().invoke(cli, ["report", str(regular)])
    assert result.exit_code == 2, result.output
    assert f"{regular}: is a file, not a sweep directory" in result.output
    assert "no such directory" not in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("damage", ["truncated", "garbage"])
def test_a_damaged_parquet_file_is_named_in_one_line(sweep_dir: Path, damage: str) -> None:
    [victim] = (sweep_dir / RUNS_DIR).glob("profile=*/*.parquet")
    if damage == "truncated":
        victim.write_bytes(victim.read_bytes()[:100])
    else:
        victim.write_text("not Parquet at all\n" * 20)
    result = report(sweep_dir, "--master", "local[1]")
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [
        f"rmqsim: error: {victim}: not a readable Parquet file (Parquet magic bytes not "
        "found in footer. Either the file is corrupted or this is not a parquet file.)"
    ]
    assert result.stdout == ""
    assert not (sweep_dir / "report.json").exists()  # refused before any work


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--html", "/proc/rmqsim/page.html"], "--html /proc/rmqsim/page.html: cannot be "),
        (["--json", "/proc/rmqsim/r.json"], "--json /proc/rmqsim/r.json: cannot be written: "),
        ([], "report.json (the default of --json): is a directory, not a file"),
        (["--html", "both.out", "--json", "both.out"], "--html and --json name the same file"),
    ],
)
def test_an_unwritable_output_is_refused_before_spark(
    sweep_dir: Path, no_spark: None, args: list[str], message: str
) -> None:
    if not args:
        (sweep_dir / "report.json").mkdir()  # where the JSON goes by default
    result = CliRunner().invoke(cli, ["report", str(sweep_dir), *args])
    assert result.exit_code == 2, result.output
    assert message in result.output, result.output
    assert SPARK_REACHED not in result.output and "Traceback" not in result.output


def test_a_missing_output_directory_is_created_before_spark(
    sweep_dir: Path, tmp_path: Path, no_spark: None
) -> None:
    """As ``--out`` is for the other commands: created, then checked, then the work."""
    page = tmp_path / "new" / "deeper" / "page.html"
    result = CliRunner().invoke(cli, ["report", str(sweep_dir), "--html", str(page)])
    assert page.parent.is_dir()
    assert result.exit_code == 2 and SPARK_REACHED in result.output, result.output


@pytest.fixture
def sweep_of_24_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """600 rows in 24 Parquet files of 25 rows, listed in the manifest as a sweep lists
    what it wrote."""
    from rmqsim.reports import synthetic

    monkeypatch.setattr(synthetic, "ROWS_PER_FILE", 25)
    return write_synthetic(tmp_path / "sweep", rows=600)


def test_a_sweep_with_files_missing_is_refused_naming_how_much_is_missing(
    sweep_of_24_files: Path, no_spark: None
) -> None:
    """Three of 24 files deleted: the report said "525 runs, 0 failed" and exit 0; it
    must say what is missing against the manifest, in one line, exit 2, before Spark."""
    files = sorted((sweep_of_24_files / RUNS_DIR).glob("profile=*/*.parquet"))
    assert len(files) == 24
    for victim in files[:3]:
        victim.unlink()
    result = CliRunner().invoke(cli, ["report", str(sweep_of_24_files)])
    assert result.exit_code == 2, result.output
    names = ", ".join(str(p.relative_to(sweep_of_24_files)) for p in files[:3])
    assert result.output.splitlines() == [
        f"rmqsim: error: {sweep_of_24_files}: 3 of the 24 data files sweep.json lists are "
        f"missing (75 of its 600 rows): {names}"
    ]
    assert not (sweep_of_24_files / "report.json").exists()


def test_a_sweep_whose_file_was_replaced_is_refused(
    sweep_of_24_files: Path, no_spark: None
) -> None:
    import pyarrow.parquet as pq

    victim = sorted((sweep_of_24_files / RUNS_DIR).glob("profile=*/*.parquet"))[5]
    pq.write_table(pq.read_table(victim).slice(0, 10), victim)
    result = CliRunner().invoke(cli, ["report", str(sweep_of_24_files)])
    assert result.exit_code == 2, result.output
    assert result.output.splitlines() == [
        f"rmqsim: error: {victim}: holds 10 rows where sweep.json records 25 (the file was "
        "replaced)"
    ]


@pytest.mark.parametrize("sweeps", ['"x"', '["x"]', "{}"])
def test_a_manifest_whose_sweeps_are_no_list_of_sweeps_is_refused(
    sweep_dir: Path, no_spark: None, sweeps: str
) -> None:
    """A string was read character by character (and counted as sweeps)."""
    manifest = sweep_dir / "sweep.json"
    text = manifest.read_text()
    start = text.index('"sweeps"')
    manifest.write_text(text[:start] + f'"sweeps": {sweeps}}}' + "\n")
    result = CliRunner().invoke(cli, ["report", str(sweep_dir)])
    assert result.exit_code == 2, result.output
    assert result.output.splitlines() == [
        f"rmqsim: error: {manifest}: 'sweeps' is not a list of sweeps"]
