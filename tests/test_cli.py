"""The command line: exit codes 0/1/2, one-line errors for bad input, outputs on disk."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

from rmqsim.conformance.cli import cli
from rmqsim.conformance.running.gate import (
    CORPUS_SUITE,
    GATE_CONSUMER_PROFILES,
    GATE_STREAM_PROFILES,
)
from rmqsim.conformance.running.trace import TraceFormatError, parse_lines, read_trace

MODEL = "rmqsim.conformance.adapter:model_factory"
WRONG = "tests.test_cli:lost_write_factory"


def lost_write_factory(**kwargs):
    """A wrong implementation importable by --impl (see tests/wrong_models.py)."""
    from rmqsim.conformance.adapter import make_model_factory
    from tests.wrong_models import LostWrite

    return make_model_factory(LostWrite)(**kwargs)


lost_write_factory.rmqsim_layer = "queue"  # it takes **kwargs: it says which form it is


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_help_lists_commands() -> None:
    result = invoke("--help")
    assert result.exit_code == 0
    for command in ("run", "replay", "gate"):
        assert command in result.output


#: Finds the commands named on its command line (a built-in, two of ``LAZY_COMMANDS``)
#: and prints whether ``importlib.metadata`` was imported on the way.
FIND_COMMANDS = """
import sys
import click
from rmqsim.conformance.cli import cli
context = click.Context(cli)
assert all(cli.get_command(context, name) is not None for name in sys.argv[1:])
print("importlib.metadata" in sys.modules)
"""


def test_finding_a_command_of_rmqsims_own_scans_no_entry_points() -> None:
    """Every ``rmqsim`` process starts by finding its command: ``importlib.metadata`` and
    the scan of every installed package's entry points (~50 ms) only for a command that
    is not rmqsim's own (``report`` and ``sweep`` come from reports/'s entry points)."""
    import subprocess
    import sys

    def metadata_imported(*names: str) -> str:
        done = subprocess.run([sys.executable, "-c", FIND_COMMANDS, *names], check=True,
                              capture_output=True, text=True, timeout=60)  # fmt: skip
        return done.stdout.strip()

    assert metadata_imported("run", "shrink", "protocol-check") == "False"
    assert metadata_imported("report") == "True"


def test_run_clean_exits_0_and_writes_trace(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    result = invoke(
        "run",
        "--profile",
        "smoke",
        "--seed",
        "1",
        "--impl",
        MODEL,
        "--trace",
        str(trace),
        "--out",
        str(tmp_path / "out"),
    )
    assert result.exit_code == 0, result.output
    parsed = read_trace(trace)
    assert parsed.header["seed"] == 1 and parsed.end["status"] == "ok"
    replay = invoke("replay", str(trace), "--impl", MODEL)
    assert replay.exit_code == 0, replay.output


def test_run_divergence_exits_1_saves_trace_and_reports(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = invoke(
        "run", "--profile", "smoke", "--seeds", "0:6", "--impl", WRONG, "--out", str(out)
    )
    assert result.exit_code == 1
    saved = sorted(out.glob("*.jsonl"))
    assert saved and "lost-write" in saved[0].name
    assert "DIVERGENCE lost-write" in result.output
    assert "repro      rmqsim run --profile smoke --seed" in result.output
    assert f"rmqsim replay {saved[0]}" in result.output
    replay = invoke("replay", str(saved[0]), "--impl", WRONG)
    assert replay.exit_code == 1 and "lost-write" in replay.output


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["run", "--profile", "nope", "--seed", "1"], "nope"),
        (["run", "--profile", "smoke"], "exactly one of"),
        (["run", "--profile", "smoke", "--seeds", "5:2"], "A < B"),
        (["run", "--profile", "smoke", "--seed", "1", "--impl", "nomodule_xyz:f"], "cannot import"),
        (
            ["run", "--profile", "smoke", "--seed", "1", "--impl", "rmqsim.conformance.adapter"],
            "module:factory",
        ),
        (
            ["run", "--profile", "smoke", "--seed", "1", "--impl",
             "rmqsim.conformance.adapter:nothing"],
            "no attribute",
        ),
        (["gate", "--profiles", "smoke,bogus", "--impl", MODEL], "bogus"),
    ],
)
def test_bad_usage_exits_2_with_one_line(args: list[str], needle: str) -> None:
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    assert needle in result.output
    assert "Traceback" not in result.output


def test_unwritable_out_exits_2(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    result = invoke(
        "run", "--profile", "smoke", "--seed", "1", "--impl", MODEL, "--out", str(blocker / "sub")
    )
    assert result.exit_code == 2
    assert "not a writable directory" in result.output


HEADER = (
    '{"type":"header","format":"rmqsim-trace","version":1,"seed":1,"config":{},"profile":"smoke"}\n'
)
STEP = '{"type":"step","i":1,"t":0,"actor":"a","op":{"kind":"run_retention"},"outcome":null}'


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("", "empty file"),
        ("not json\n", ":1: not valid JSON"),
        ('{"type":"step"}\n', ":1: the first line must be the header"),
        (
            '{"type":"header","format":"rmqsim-trace","version":99,"seed":1,"config":{}}\n',
            "version 99 is not supported",
        ),
        ('{"type":"header","format":"other","version":1}\n', "not an rmqsim-trace file"),
        (
            HEADER
            + '{"type":"step","i":1,"t":0,"actor":"a","op":{"kind":"fly"},"outcome":null}\n',
            ":2: bad operation",
        ),
        (
            HEADER + STEP.replace('"i":1', '"i":7') + "\n",
            ":2: step index must be 1",
        ),
        (
            '{"type":"header","format":"rmqsim-trace","version":"1","seed":1,"config":{}}\n',
            ":1: format version must be an integer, got '1'",
        ),
        (
            '{"type":"header","format":"rmqsim-trace","version":1,"seed":1,"config":{}}\n',
            ":1: header field 'profile' is missing or wrong",
        ),
        (HEADER.replace('"profile"', '"impl":5,"profile"'), ":1: header field 'impl' must be"),
        (HEADER, ":2: no end line after step 0: the trace is truncated"),
        (
            HEADER + STEP + "\n" + STEP.replace('"i":1', '"i":2') + "\n",
            ":4: no end line after step 2: the trace is truncated",
        ),
        (
            HEADER + STEP + '\n{"type":"end","steps":5,"status":"ok"}\n',
            ":3: the end line says 5 steps but the trace holds 1",
        ),
    ],
)
def test_malformed_trace_exits_2_naming_file_and_line(
    tmp_path: Path, content: str, needle: str
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(TraceFormatError):
        read_trace(path)
    result = invoke("replay", str(path), "--impl", MODEL)
    assert result.exit_code == 2
    assert str(path) in result.output and needle in result.output


def test_truncated_trace_is_refused(tmp_path: Path) -> None:
    """A trace cut after a step line (no end line) is refused, not replayed as a shorter
    run that passes: a truncated corpus file must not check less in silence. A cut inside
    a line is refused too."""
    trace = tmp_path / "t.jsonl"
    invoke(
        "run",
        "--profile",
        "smoke",
        "--seed",
        "2",
        "--impl",
        MODEL,
        "--trace",
        str(trace),
        "--out",
        str(tmp_path),
    )
    lines = trace.read_text().splitlines()
    cut = tmp_path / "cut.jsonl"
    cut.write_text("\n".join(lines[:40]) + "\n")
    result = invoke("replay", str(cut), "--impl", MODEL)
    assert result.exit_code == 2 and ":41: no end line after step 39" in result.output
    cut.write_text("\n".join(lines[:40]) + "\n" + lines[40][: len(lines[40]) // 2])
    result = invoke("replay", str(cut), "--impl", MODEL)
    assert result.exit_code == 2 and ":41:" in result.output


def test_gate_writes_junit_and_summary(tmp_path: Path) -> None:
    out = tmp_path / "gate"
    result = invoke("gate", "--impl", MODEL, "--seeds", "0:2", "--out", str(out))
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "ok"
    assert set(summary["profiles"]) >= {"smoke", "crashy", "retention", "digits", "swarm"}
    root = ET.parse(out / "junit.xml").getroot()
    suites = [s.get("name") for s in root.findall("testsuite")]
    # One suite per profile, then the crash sweep of seed 0 of each queue profile (consumer
    # runs crash their clients their own way and are not swept).
    assert suites[-1] == "rmqsim.crash-sweep"
    assert sorted(suites[:-1]) == sorted(f"rmqsim.{p}" for p in summary["profiles"])
    unswept = {*GATE_CONSUMER_PROFILES, *GATE_STREAM_PROFILES, CORPUS_SUITE}
    swept = set(summary["profiles"]) - unswept
    assert set(summary["crash_sweep"]) == swept
    assert all(s.get("failures") == "0" for s in root.findall("testsuite"))


def test_gate_on_a_wrong_implementation_fails_with_junit_failures(tmp_path: Path) -> None:
    out = tmp_path / "gate"
    result = invoke(
        "gate", "--impl", WRONG, "--seeds", "0:2", "--profiles", "smoke", "--out", str(out)
    )
    assert result.exit_code == 1
    root = ET.parse(out / "junit.xml").getroot()
    failures = root.findall(".//failure")
    assert failures and failures[0].get("message") == "lost-write"
    assert json.loads((out / "summary.json").read_text())["failures"][0]["trace"]


def test_parse_lines_roundtrip_of_a_real_trace(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    invoke(
        "run",
        "--profile",
        "churn",
        "--seed",
        "4",
        "--impl",
        MODEL,
        "--trace",
        str(trace),
        "--out",
        str(tmp_path),
    )
    parsed = parse_lines(trace.read_text().splitlines())
    assert len(parsed.steps) == parsed.end["steps"]


@pytest.mark.parametrize("config", ['{"page_size_bytes":0}', '{"page_size_bytes":1,"bogus":2}'])
def test_trace_with_a_bad_config_exits_2(tmp_path: Path, config: str) -> None:
    path = tmp_path / "bad-config.jsonl"
    header = HEADER.replace('"config":{}', f'"config":{config}')
    path.write_text(header + '{"type":"end","steps":0}\n')
    result = invoke("replay", str(path), "--impl", MODEL)
    assert result.exit_code == 2, result.output
    assert f"{path}:1: header config is not an MQConfig" in result.output
