"""A broken implementation never crashes the harness (issue 38): for each layer, an
implementation whose every method raises, one that raises only after some operations (in
its ``snapshot`` where the layer reads one), one whose results are of the wrong types, a
factory that raises when called and one that returns the wrong type. ``rmqsim gate`` must
report each as the implementation's failure: exit 1 with the report, the repro line, the
trace and its shrink (or exit 2 and one line for a factory that returns no factory),
never exit 3 (internal error) or a traceback. The implementations are in
``tests/broken_impls.py``, loaded through ``--impl MODULE:FACTORY`` as a user's are."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from rmqsim.conformance.cli import cli
from rmqsim.conformance.crashing.power_loss import power_loss_sweep
from rmqsim.conformance.running.run import run_seed

_MOD = "tests.broken_impls"

#: (factory, gate arguments, the anomaly the gate must name, what its detail says).
_FAILING = [
    ("queue_raises", ["--profiles", "smoke", "--sweep-steps", "4"], "error-mismatch", ""),
    ("queue_snapshot_raises_later", ["--profiles", "smoke", "--sweep-steps", "4"],
     "outcome-mismatch", "snapshot() raised Broken"),
    ("queue_returns_junk", ["--profiles", "smoke", "--sweep-steps", "4"], None, ""),
    ("raising_factory", ["--profiles", "smoke", "--sweep-steps", "4"], "unrecoverable",
     "raised Broken: cannot open"),
    ("storage_raises", ["--profiles", "smoke", "--sweep-steps", "4", "--power-steps", "4"],
     "error-mismatch", ""),
    ("storage_snapshot_raises", ["--profiles", "smoke,stream", "--sweep-steps", "4",
                                 "--power-steps", "4"], "outcome-mismatch",
     "snapshot() raised Broken"),
    ("consumer_raises", ["--profiles", "consumer"], "consumer-mismatch", ""),
    ("consumer_raises_later", ["--profiles", "consumer"], "consumer-mismatch", ""),
    ("consumer_returns_junk", ["--profiles", "consumer"], "consumer-mismatch", ""),
    ("stream_raises", ["--profiles", "stream"], "stream-mismatch", ""),
    ("stream_factory_raises", ["--profiles", "stream"], "stream-mismatch", ""),
    ("stream_snapshot_raises_later", ["--profiles", "stream"], "stream-state-mismatch",
     "snapshot() of stream"),
    ("stream_queue_snapshot_raises", ["--profiles", "stream"], "stream-state-mismatch",
     "the queue's snapshot() raised Broken"),
    ("stream_returns_junk", ["--profiles", "stream"], "stream-state-mismatch", ""),
]  # fmt: skip


def _gate(tmp_path: Path, factory: str, *args: str) -> tuple[int, str]:
    done = CliRunner().invoke(cli, [
        "gate", "--impl", f"{_MOD}:{factory}", "--seeds", "0:1", "--steps", "40",
        "--jobs", "1", "--out", str(tmp_path), "--corpus", str(tmp_path / "no-corpus"),
        *args,
    ])  # fmt: skip
    return done.exit_code, done.output + (repr(done.exception) if done.exception else "")


@pytest.mark.parametrize(("factory", "args", "anomaly", "detail"), _FAILING,
                         ids=[row[0] for row in _FAILING])  # fmt: skip
def test_the_gate_reports_a_broken_implementation_as_its_failure(
    tmp_path: Path, factory: str, args: list[str], anomaly: str | None, detail: str
) -> None:
    (tmp_path / "no-corpus").mkdir()
    code, output = _gate(tmp_path, factory, *args)
    assert code == 1, output
    assert "internal error" not in output and "Traceback" not in output, output
    assert "DIVERGENCE" in output and "repro      rmqsim run --profile" in output, output
    if anomaly is not None:
        assert f"DIVERGENCE {anomaly}" in output, output
    assert detail in output, output
    traces = sorted(p.name for p in tmp_path.glob("*.jsonl") if "shrunk" not in p.name)
    shrunk = sorted(p.name for p in tmp_path.glob("*.shrunk.jsonl"))
    assert traces and shrunk, output
    assert (tmp_path / "junit.xml").exists() and (tmp_path / "summary.json").exists()


@pytest.mark.parametrize("factory", ["wrong_type_factory", "wrong_type_stream_factory"])
def test_a_factory_returning_no_implementation_is_refused_in_one_line(
    tmp_path: Path, factory: str
) -> None:
    (tmp_path / "no-corpus").mkdir()
    profile = "stream" if "stream" in factory else "smoke"
    code, output = _gate(tmp_path, factory, "--profiles", profile)
    assert code == 2, output
    assert "internal error" not in output and "Traceback" not in output, output
    assert f"{_MOD}:{factory} returned a " in output and ", which has no " in output, output


def test_the_stream_layer_final_check_reports_the_queue_snapshot_raising() -> None:
    """The final check reads the queue under the streams (the known hole of
    ``conformance/stream/run.py``): its exception is the run's divergence."""
    result = run_seed("stream", 0, impl=f"{_MOD}:stream_queue_snapshot_raises", steps=40)
    assert result.divergence is not None, result
    assert result.anomaly == "stream-state-mismatch"
    assert "the queue's snapshot() raised Broken" in result.divergence.detail


def test_the_stream_layer_reports_a_stream_snapshot_raising_after_some_operations() -> None:
    result = run_seed("stream", 0, impl=f"{_MOD}:stream_snapshot_raises_later", steps=40)
    assert result.anomaly == "stream-state-mismatch", result
    assert result.divergence is not None and "raised Broken" in result.divergence.detail
    assert result.divergence.step_index > 1  # the first snapshots answered


def test_the_power_loss_base_run_reports_a_backend_whose_snapshot_raises() -> None:
    """The power-loss sweep's run without cuts reads the final state (the known hole of
    ``conformance/crashing/power_loss.py``): its exception is the sweep's base problem."""
    sweep = power_loss_sweep("smoke", 0, impl=f"{_MOD}:storage_snapshot_raises", steps=4)
    assert not sweep.ok and not sweep.cases
    assert sweep.base_problem is not None
    assert "the final snapshot() raised Broken" in sweep.base_problem


def test_a_queue_whose_forget_raises_keeps_the_runs_verdict() -> None:
    """``rmqsim_forget`` (the optional end-of-run call) raising after the verdict."""
    result = run_seed("smoke", 0, impl=f"{_MOD}:queue_raises", steps=20)
    assert result.anomaly == "error-mismatch", result
