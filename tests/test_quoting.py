"""Every command line rmqsim prints or writes (failure report, gate summary, JUnit XML,
corpus notes) is quoted for a POSIX shell: pasted as it stands, it runs, even when a path
holds spaces and quotes."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from rmqsim.conformance.cli import cli

WRONG = "tests.spark_impls:lost_write"  # smoke seed 0: lost-write at its third step
ROOT = Path(__file__).resolve().parent.parent
AWKWARD = "dir with spaces and 'quotes'"


def rmqsim(*args: object) -> Any:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def commands_in(text: str) -> list[str]:
    """The rmqsim command lines in ``text``: from ``rmqsim run``/``rmqsim replay`` to the
    end of the line."""
    found = []
    for line in text.splitlines():
        for verb in ("rmqsim run ", "rmqsim replay "):
            if verb in line:
                found.append(line[line.index(verb) :])
    return found


def in_shell(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``command`` run by a POSIX shell, as a user who pasted it would."""
    bin_dir = str(Path(sys.executable).parent)
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", PYTHONPATH=str(ROOT))
    return subprocess.run(
        ["sh", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )


@pytest.fixture(scope="module")
def failing_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    root = tmp_path_factory.mktemp("quoting")
    result = rmqsim(
        "run", "--profile", "smoke", "--seed", "0", "--impl", WRONG, "--shrink-ops-budget",
        "5000", "--out", root / AWKWARD / "out", "--save-regression", root / AWKWARD / "corpus",
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    return root, result


def test_the_failure_report_and_the_corpus_note_print_pastable_commands(
    failing_run: tuple[Path, Any],
) -> None:
    root, result = failing_run
    commands = commands_in(result.stderr)
    replays = [c for c in commands if c.startswith("rmqsim replay ")]
    # the trace, the shrunk trace, and the corpus file on the wrong queue
    assert len(replays) == 3, commands
    for command in replays:
        argv = shlex.split(command)
        assert Path(argv[2]).is_file() and AWKWARD in argv[2], argv
    [corpus_note] = [c for c in replays if "--impl" in c]
    done = in_shell(corpus_note, root)
    # It replays (and diverges, on the wrong queue), rather than "no such file" or extra args.
    assert done.returncode == 1, done.stderr
    assert "lost-write" in done.stdout


def test_the_gate_writes_pastable_commands_in_summary_and_junit(
    failing_run: tuple[Path, Any],
) -> None:
    """A corpus replay's repro names its file: quoted in summary.json and in the JUnit
    failure text, as are the report's replay lines."""
    root, _ = failing_run
    out = root / AWKWARD / "gate out"
    result = rmqsim(
        "gate", "--profiles", "smoke", "--seeds", "0:1", "--no-crash-sweep", "--no-shrink",
        "--impl", WRONG, "--corpus", root / AWKWARD / "corpus", "--out", out,
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    summary = json.loads((out / "summary.json").read_text())
    repros = [failure["repro"] for failure in summary["failures"]]
    [corpus_repro] = [r for r in repros if r.startswith("rmqsim replay ")]
    argv = shlex.split(corpus_repro)
    assert Path(argv[2]).is_file() and argv[3:] == ["--impl", WRONG], argv
    assert in_shell(corpus_repro, root).returncode == 1
    text = "\n".join(f.text or "" for f in ET.parse(out / "junit.xml").getroot().iter("failure"))
    replays = [c for c in commands_in(text) if c.startswith("rmqsim replay ")]
    assert replays
    for command in replays:
        assert Path(shlex.split(command)[2]).is_file(), command
