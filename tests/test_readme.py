"""The README's sample failure report is real output: the command it shows, run now, prints
the same report (the versions line aside), so the Quick Start stays true."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from conformance.cli import cli

README = Path(__file__).resolve().parents[1] / "README.md"


def _sample() -> tuple[list[str], list[str]]:
    """The sample's command (argv after ``rmqsim``) and the lines it shows."""
    text = README.read_text(encoding="utf-8")
    intro = text.index("A divergence prints a report like this")
    block = re.search(r"```\n(\$ rmqsim .*?)```", text[intro:], re.S)
    assert block is not None, "the Quick Start's sample report is missing"
    command, *lines = block.group(1).splitlines()
    return shlex.split(command.removeprefix("$ rmqsim ")), lines


def _without_versions(lines: list[str]) -> list[str]:
    return [line for line in lines if not line.lstrip().startswith("versions ")]


def test_the_sample_failure_report_is_what_the_command_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    argv, shown = _sample()
    monkeypatch.chdir(tmp_path)  # the report names rmqsim-out/... relative to here
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == 1, result.output
    assert _without_versions(result.output.splitlines()) == _without_versions(shown)
