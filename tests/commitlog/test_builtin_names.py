"""``--impl commitlog`` and ``--impl commitlog-async`` name the backend's factories."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from rmqsim.conformance.adapter import load_factory
from rmqsim.conformance.cli import cli
from rmqsim.impl.commitlog import open_queue, open_queue_async


def test_the_builtin_names_resolve_to_the_factories() -> None:
    assert load_factory("commitlog") is open_queue
    assert load_factory("commitlog-async") is open_queue_async


def test_a_run_checks_the_backend_by_its_name(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli,
        ["run", "--profile", "crashy", "--seeds", "0:2", "--impl", "commitlog-async",
         "--out", str(tmp_path)],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    assert "0 divergence(s)" in result.output
