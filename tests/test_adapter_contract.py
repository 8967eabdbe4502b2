"""A user's adapter that breaks its contract gets a clear answer, never "internal error,
please report it" (exit 3): a factory that returns no queue, or a queue without the
protocol's methods, or a ``snapshot()`` of the wrong type, is bad input (exit 2, one line
naming what is wrong); a queue that cannot be created in a fresh directory is the queue's
failure (exit 1, ``unrecoverable`` at the first step, with the usual report and trace)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from conformance.adapter import QUEUE_METHODS, BadImplError, model_factory
from conformance.cli import cli
from conformance.run import run_seed


class DiskOnFire(RuntimeError):
    pass


def raising_factory(**_: Any) -> Any:
    raise DiskOnFire("cannot open the database: disk on fire")


def none_factory(**_: Any) -> Any:
    return None


class _Half:
    """Only part of the protocol (a user's work in progress)."""

    def create_topic(self, topic: str) -> None:
        pass

    def crash(self) -> None:
        pass

    def close(self) -> None:
        pass


def half_factory(**_: Any) -> Any:
    return _Half()


class _DictSnapshot:
    """The model, but ``snapshot()`` returns a plain dict instead of ``State``."""

    def __init__(self, queue: Any) -> None:
        self._queue = queue

    def __getattr__(self, name: str) -> Any:
        return getattr(self._queue, name)

    def snapshot(self, **_: Any) -> Any:
        state = self._queue.snapshot()
        return {"topics": dict(state.topics), "groups": dict(state.groups)}


def dict_snapshot_factory(**kwargs: Any) -> Any:
    return _DictSnapshot(model_factory(**kwargs))


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args))


def test_a_queue_that_cannot_open_a_fresh_directory_diverges_at_the_first_step() -> None:
    result = run_seed("smoke", 0, impl=raising_factory)
    assert not result.ok and result.divergence is not None
    assert result.divergence.anomaly == "unrecoverable"
    assert result.divergence.step_index == 1
    assert "opening a fresh directory raised DiskOnFire: cannot open the database" in (
        result.divergence.detail
    )


def test_the_consumer_layer_reports_a_queue_that_cannot_open_the_same_way() -> None:
    result = run_seed("consumer", 0, impl=raising_factory)
    assert not result.ok and result.divergence is not None
    assert result.divergence.anomaly == "unrecoverable"
    assert "opening a fresh directory raised DiskOnFire" in result.divergence.detail


def test_cli_run_and_gate_exit_1_with_a_report_for_a_queue_that_cannot_open(
    tmp_path: Path,
) -> None:
    impl = f"{__name__}:raising_factory"
    done = _invoke(
        "run", "--profile", "smoke", "--seed", "0", "--impl", impl, "--out", str(tmp_path)
    )
    assert done.exit_code == 1, done.output
    assert "DIVERGENCE unrecoverable" in done.output
    assert "internal error" not in done.output
    out = tmp_path / "gate"
    done = _invoke("gate", "--seeds", "0:1", "--impl", impl, "--out", str(out))
    assert done.exit_code == 1, done.output
    assert (out / "junit.xml").is_file() and (out / "summary.json").is_file()


@pytest.mark.parametrize(
    ("factory", "expected"),
    [
        ("none_factory", "none_factory returned None instead of a queue"),
        (
            "half_factory",
            "returned a _Half, which has no consume(), create_consumer_group(), ",
        ),
        ("dict_snapshot_factory", "snapshot() returned dict, not model.api.State"),
    ],
)
@pytest.mark.parametrize(
    "command",
    [
        ["run", "--profile", "smoke", "--seed", "0"],
        ["fuzz"],
        ["crash-sweep", "--profile", "smoke", "--seed", "0"],
        ["run", "--profile", "consumer", "--seed", "0"],
    ],
    ids=["run", "fuzz", "crash-sweep", "consumer-run"],
)
def test_a_factory_breaking_the_adapter_contract_is_bad_input(
    factory: str, expected: str, command: list[str], tmp_path: Path
) -> None:
    if command[-3:-1] == ["consumer", "--seed"] and factory == "dict_snapshot_factory":
        pytest.skip("the consumer layer reads no queue snapshot")
    done = _invoke(*command, "--impl", f"{__name__}:{factory}", "--out", str(tmp_path))
    assert done.exit_code == 2, done.output
    assert expected in done.output, done.output
    assert "internal error" not in done.output and "Traceback" not in done.output


def test_every_method_of_the_protocol_is_required() -> None:
    assert "crash" in QUEUE_METHODS and "snapshot" in QUEUE_METHODS
    assert len(QUEUE_METHODS) == len(set(QUEUE_METHODS)) == 14
    with pytest.raises(BadImplError, match=r"has no consume\(\)"):
        run_seed("smoke", 0, impl=half_factory)
