"""The documentation site (mkdocs.yml over docs/) builds in strict mode: no page outside the
navigation, no link to a missing page or anchor, no other warning; its CLI reference is
generated from the click commands and covers every command ``rmqsim --help`` lists; its
benchmark history is drawn from bench/history.jsonl."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import click

from rmqsim.conformance.cli import cli

ROOT = Path(__file__).resolve().parent.parent


def _mkdocs(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
         "--site-dir", str(site)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip


def _hook(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "docs" / "hooks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _commands(group: click.Group, prefix: str) -> list[str]:
    ctx = click.Context(group)
    found = []
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        found.append(f"{prefix}-{name}")
        if isinstance(command, click.Group):
            found += _commands(command, f"{prefix}-{name}")
    return found


def test_the_site_builds_strict_and_its_cli_reference_covers_every_command(
    tmp_path: Path,
) -> None:
    done = _mkdocs(ROOT / "mkdocs.yml", tmp_path / "site")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARNING" not in done.stderr, done.stderr
    reference = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text()
    documented = set(re.findall(r'id="(rmqsim(?:-[\w-]+)?)"', reference))
    expected = set(_commands(cli, "rmqsim"))
    assert {"rmqsim-sweep", "rmqsim-bench", "rmqsim-store-dump", "rmqsim-gate"} <= expected
    assert expected <= documented, expected - documented
    history = (tmp_path / "site" / "bench-history" / "index.html").read_text()
    assert history.count("<svg") >= 5 and "lockstep.smoke.ops_per_s" in history


def test_a_broken_link_or_anchor_fails_the_strict_build(tmp_path: Path) -> None:
    """What the build above relies on: the same validation settings turn a missing page
    and a missing anchor into a failed build."""
    config = (ROOT / "mkdocs.yml").read_text()
    validation = config[config.index("validation:"):config.index("hooks:")]
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\n[there](other.md#no-such-heading)\n")
    (docs / "other.md").write_text("# Other\n\n[gone](missing.md)\n")
    own = tmp_path / "mkdocs.yml"
    own.write_text(f"site_name: t\ndocs_dir: {docs}\nstrict: true\n{validation}")
    done = _mkdocs(own, tmp_path / "site")
    assert done.returncode != 0
    assert "missing.md" in done.stderr and "no-such-heading" in done.stderr, done.stderr


def _record(date: str, value: float, target: float | None, met: bool | None) -> dict[str, Any]:
    return {"name": "lockstep.smoke.ops_per_s", "value": value, "unit": "ops/s",
            "target": target, "better": "higher" if target else None, "met": met,
            "load_average": [1.5], "cpus": 2, "commit": "abc1234", "date": date,
            "params": {}}  # fmt: skip


def test_the_history_page_plots_each_record_and_marks_a_missed_target() -> None:
    hook = _hook("bench_history")
    rows = [_record("2026-11-21", 8044, 10000, False), _record("2026-11-27", 12000, 10000, True)]
    page = hook.render(rows)
    assert page.count("<circle") == 2 and page.count('fill="#c62828"') == 1  # the missed one
    assert page.count("stroke-dasharray") == 1  # the target line
    assert page.count("| 2026-11-2") == 2 and "| missed |" in page and "| met |" in page
    assert hook.render([]) == ""
    marked = hook.on_page_markdown(f"# H\n\n{hook.MARKER}\n", page=None)
    assert hook.MARKER not in marked and "<svg" in marked


def test_a_link_to_the_readme_goes_to_the_home_page() -> None:
    hook = _hook("front_page")
    assert hook.to_home("in the [README](../README.md).", 0) == "in the [README](index.md)."
    assert hook.to_home("[x](../../README.md#set-up)", 1) == "[x](../index.md)"
    assert hook.to_home("[y](../README.md)", 1) == "[y](../README.md)"  # not the root's
