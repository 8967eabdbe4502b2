"""The README's sample failure report is real output: the command it shows, run now, prints
the same report (the versions line aside), so the Quick Start stays true."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from rmqsim.conformance.cli import cli

README = Path(__file__).resolve().parents[1] / "README.md"


def _sample() -> tuple[list[str], list[str]]:
    """The sample's command (argv after ``rmqsim``) and the lines it shows."""
    text = README.read_text(encoding="utf-8")
    intro = text.index("A divergence prints a report like this")
    block = re.search(r"```\n(\$ rmqsim .*?)```", text[intro:], re.S)
    assert block is not None, "the Quick Start's sample report is missing"
    command, *lines = block.group(1).splitlines()
    return shlex.split(command.removeprefix("$ rmqsim ")), lines


#: The figures of the last line, the command's time, which vary from run to run.
_TIMES = re.compile(r"\d+\.\d s")
#: A progress line, printed where stderr is not a terminal (as here), not on one (as shown).
_PROGRESS = re.compile(r"^rmqsim run: .*, \d+\.\d s elapsed$")


def _without_versions(lines: list[str]) -> list[str]:
    """The lines but the versions line and progress lines, the time's figures as ``N``."""
    return [_TIMES.sub("N s", line) for line in lines
            if not line.lstrip().startswith("versions ") and not _PROGRESS.match(line)]


def test_the_sample_failure_report_is_what_the_command_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    argv, shown = _sample()
    monkeypatch.chdir(tmp_path)  # the report names rmqsim-out/... relative to here
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == 1, result.output
    assert _without_versions(result.output.splitlines()) == _without_versions(shown)
    assert shown[-1].endswith("child processes included)")  # the sample shows the time too


def test_the_readme_links_only_to_files_in_the_repository() -> None:
    """A clone must hold what the README points to (the contract once lived outside it)."""
    text = README.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)#\s]+)\)", text)
    local = [t for t in targets if "://" not in t and not t.startswith("mailto:")]
    assert local, "no local links found: the pattern is wrong"
    root = README.parent
    outside = [t for t in local if not (root / t).resolve().is_relative_to(root)]
    missing = [t for t in local if not (root / t).exists()]
    assert (outside, missing) == ([], []), (outside, missing)


def test_bring_your_own_queue_points_at_the_adapter_contract_whose_links_resolve() -> None:
    """The README's "Bring your own queue" stays short and links docs/ADAPTER.md, the
    whole contract; the page's own relative links resolve inside the repository."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Bring your own queue") :]
    section = section[: section.index("\n## ", 1)]
    assert "](docs/ADAPTER.md)" in section
    assert len(section.splitlines()) <= 40, "keep the section short: details go to the page"
    page = README.parent / "docs" / "ADAPTER.md"
    targets = re.findall(r"\]\(([^)#\s]+)\)", page.read_text(encoding="utf-8"))
    local = [t for t in targets if "://" not in t]
    assert local, "no local links found: the pattern is wrong"
    root = README.parent
    outside = [t for t in local if not (page.parent / t).resolve().is_relative_to(root)]
    missing = [t for t in local if not (page.parent / t).exists()]
    assert (outside, missing) == ([], []), (outside, missing)


def test_the_contracts_copy_matches_the_workplaces_when_it_is_there() -> None:
    shared = README.parents[1] / "shared" / "SPEC.md"
    if not shared.exists():
        pytest.skip("no workplace copy of SPEC.md next to this checkout")
    copy = (README.parent / "docs" / "SPEC.md").read_text(encoding="utf-8")
    assert copy.endswith(shared.read_text(encoding="utf-8"))
