"""A storage backend's durability promise is its own to declare (``rmqsim_flush``) or the
command line's (``gate --flush``, ``crash-sweep --storage [--flush]``), never decided by
whether the factory *is* a built-in: a pass-through wrapper of the async backend is held
to async when it says so, to sync (the full SPEC) when it says nothing; a factory that
hides its keywords is refused, never quietly left without its power-loss sweep."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from rmqsim.conformance.adapter import FLUSH_PROMISES
from rmqsim.conformance.cli import cli
from rmqsim.conformance.cli.common import FLUSH_CHOICES
from rmqsim.impl.commitlog import open_queue_async

#: One profile, one seed, no crash sweep: the gate's power-loss step alone is under test.
GATE_ARGS = ["gate", "--profiles", "crashy", "--seeds", "0:1", "--no-crash-sweep",
             "--power-steps", "3", "--jobs", "1", "--no-shrink"]  # fmt: skip
HERE = "tests.commitlog.test_flush_promise"


def passthrough(*, path: Any, config: Any, clock: Any, faults: Any, fs: Any = None) -> Any:
    """The async backend under another name, promising nothing."""
    return open_queue_async(path=path, config=config, clock=clock, faults=faults, fs=fs)


def declared_async(*, path: Any, config: Any, clock: Any, faults: Any, fs: Any = None) -> Any:
    """The async backend under another name, declaring its promise."""
    return open_queue_async(path=path, config=config, clock=clock, faults=faults, fs=fs)


declared_async.rmqsim_flush = "async"  # type: ignore[attr-defined]


def hidden(**kwargs: Any) -> Any:
    """The async backend behind ``**kwargs``: what it takes is hidden."""
    return open_queue_async(**kwargs)


def hidden_declared(**kwargs: Any) -> Any:
    """The same, declaring its form and promise."""
    return open_queue_async(**kwargs)


hidden_declared.rmqsim_layer = "storage"  # type: ignore[attr-defined]
hidden_declared.rmqsim_flush = "async"  # type: ignore[attr-defined]


def _gate(tmp_path: Path, name: str, *more: str) -> tuple[Any, dict[str, Any]]:
    out = tmp_path / name
    done = CliRunner().invoke(cli, [*GATE_ARGS, "--impl", f"{HERE}:{name}", "--out", str(out),
                                    *more])  # fmt: skip
    summary = json.loads((out / "summary.json").read_text()) if done.exit_code in (0, 1) else {}
    return done, summary


def test_a_passthrough_of_the_async_backend_is_held_to_the_promise_it_makes(
    tmp_path: Path,
) -> None:
    # Promising nothing, it is held to sync, which async flush breaks.
    silent, summary = _gate(tmp_path, "passthrough")
    assert silent.exit_code == 1, silent.output
    assert summary["power_loss"]["crashy"]["promise"] == "sync"
    # Declared, or given on the command line, the async promise: it keeps it.
    for name, more in (("declared_async", ()), ("passthrough", ("--flush", "async"))):
        kept, summary = _gate(tmp_path, name, *more)
        assert kept.exit_code == 0, (name, more, kept.output)
        power = summary["power_loss"]["crashy"]
        assert (power["promise"], power["failed"]) == ("async", 0) and power["cases"] > 0


def test_a_factory_hiding_its_keywords_is_asked_to_declare_them(tmp_path: Path) -> None:
    refused, _ = _gate(tmp_path, "hidden")
    assert refused.exit_code == 2, refused.output
    assert "hides what it takes" in refused.output and "rmqsim_layer" in refused.output
    swept, summary = _gate(tmp_path, "hidden_declared")
    assert swept.exit_code == 0, swept.output
    assert summary["power_loss"]["crashy"]["promise"] == "async"


def test_gate_flush_needs_a_storage_backend(tmp_path: Path) -> None:
    done = CliRunner().invoke(cli, [*GATE_ARGS, "--impl", "rocksmq", "--flush", "async",
                                    "--out", str(tmp_path)])  # fmt: skip
    assert done.exit_code == 2
    assert "--flush: --impl rocksmq is a queue factory, not a storage backend" in done.output


@pytest.mark.parametrize(
    ("args", "promise"),
    [
        (["--storage"], "async"),  # bare: the promise the factory declares
        (["--storage", "--flush", "sync"], "sync"),
        (["--storage", "sync"], "sync"),
    ],
)
def test_crash_sweep_storage_takes_the_declared_promise(
    tmp_path: Path, args: list[str], promise: str
) -> None:
    done = CliRunner().invoke(cli, ["crash-sweep", *args, "--profile", "crashy", "--steps", "2",
                                    "--impl", f"{HERE}:declared_async", "--out", str(tmp_path)])
    assert f"rmqsim crash-sweep --storage {promise}: profile crashy" in done.output, done.output


def test_crash_sweep_refuses_disagreeing_promises(tmp_path: Path) -> None:
    done = CliRunner().invoke(cli, ["crash-sweep", "--storage", "sync", "--flush", "async",
                                    "--profile", "crashy", "--out", str(tmp_path)])
    assert done.exit_code == 2 and "--storage sync and --flush async disagree" in done.output


def test_the_cli_restates_the_promises() -> None:
    assert FLUSH_CHOICES == FLUSH_PROMISES
