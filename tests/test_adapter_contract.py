"""A user's adapter that breaks its contract gets a clear answer, never "internal error,
please report it" (exit 3): a factory that returns no queue, or a queue without the
protocol's methods, or a ``snapshot()`` of the wrong type, is bad input (exit 2, one line
naming what is wrong); a queue that cannot be created in a fresh directory is the queue's
failure (exit 1, ``unrecoverable`` at the first step, with the usual report and trace)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar

import pytest
from click.testing import CliRunner

from rmqsim.conformance.adapter import (
    QUEUE_METHODS,
    BadImplError,
    make_model_factory,
    model_factory,
    rocksmq_factory,
)
from rmqsim.conformance.cli import cli
from rmqsim.conformance.consumer.run import impl_consumer_factory
from rmqsim.conformance.running.lockstep import InjectedCrash
from rmqsim.conformance.running.run import run_seed
from rmqsim.model import ReferenceMQ
from rmqsim.model.api import State, validate_name
from rmqsim.scenarios.names import is_valid_name


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


# They take **kwargs: each declares its form.
for _factory in (raising_factory, none_factory, half_factory, dict_snapshot_factory):
    _factory.rmqsim_layer = "queue"  # type: ignore[attr-defined]


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


# ---------------------------------------------------------------- docs/ADAPTER.md's points
# Three things the adapter contract (docs/ADAPTER.md) tells a user that the code does and
# that users had to guess: each test holds the page to what the harness really does.

ADAPTER_DOC = Path(__file__).resolve().parents[1] / "docs" / "ADAPTER.md"


def _adapter_doc() -> str:
    return " ".join(ADAPTER_DOC.read_text(encoding="utf-8").split())


class _StrictTopicsSnapshot(ReferenceMQ):
    """``snapshot(topics=...)`` that validates the names it is asked about, as a user
    might: an invalid name raises ``InvalidArgumentError`` instead of being left out."""

    def snapshot(self, topics: Iterable[str] | None = None, messages_from: Any = None) -> State:
        names = None if topics is None else list(topics)
        for name in names or ():
            validate_name("topic", name)
        return super().snapshot(topics=names, messages_from=messages_from)


def test_snapshot_topics_is_asked_about_invalid_names_and_must_leave_them_out() -> None:
    doc = _adapter_doc()
    assert "not a valid name at all" in doc and "leave it out and do not raise" in doc
    assert run_seed("smoke", 0, impl=model_factory, steps=200).ok
    result = run_seed("smoke", 0, impl=make_model_factory(_StrictTopicsSnapshot), steps=200)
    assert result.divergence is not None and result.anomaly == "outcome-mismatch"
    assert "snapshot() raised InvalidArgumentError" in result.divergence.detail
    named = getattr(result.divergence.step.op, "topic", None)
    assert isinstance(named, str) and not is_valid_name(named)


def test_the_factory_path_does_not_exist_yet_and_reopens_find_it() -> None:
    doc = _adapter_doc()
    assert "On the first call the directory does not exist yet" in doc
    assert "it does not exist on the first call" in doc  # the consumer's offsets path
    queue_calls: list[tuple[Path, bool, bool]] = []
    consumer_calls: list[tuple[Path, bool]] = []

    def open_queue(*, path: Path, config: Any, clock: Any, faults: Any) -> Any:
        queue_calls.append((path, path.exists(), path.parent.is_dir()))
        return rocksmq_factory(path=path, config=config, clock=clock, faults=faults)

    def open_consumer(
        *, queue: Any, group: str, topic: str, config: Any, clock: Any, path: Path, send_hook: Any
    ) -> Any:
        consumer_calls.append((path, path.exists()))
        return impl_consumer_factory(
            queue=queue,
            group=group,
            topic=topic,
            config=config,
            clock=clock,
            path=path,
            send_hook=send_hook,
        )

    assert run_seed("crashy", 0, impl=open_queue, steps=150).ok
    (first, _, parent_is_dir), *reopens = queue_calls
    assert (queue_calls[0][1], parent_is_dir) == (False, True)
    assert reopens and all(path == first and exists for path, exists, _ in reopens)
    assert run_seed("consumer-crashy", 0, impl=open_consumer, steps=300).ok
    firsts = {path: exists for path, exists in reversed(consumer_calls)}
    assert firsts and not any(firsts.values())  # each group's offsets path, at its first start
    assert len(consumer_calls) > len(firsts)  # restarts get the same path back


class _RollbackOnException(ReferenceMQ):
    """A produce with a crash point inside ``try/except Exception`` (a user's rollback),
    counting which handler the injected crash reaches."""

    caught: ClassVar[dict[str, int]] = {"Exception": 0, "BaseException": 0}

    def produce(self, topic: str, messages: Any) -> list[int]:
        try:
            self.faults("produce.before_write")  # type: ignore[attr-defined]
        except Exception:
            self.caught["Exception"] += 1  # a rollback would run here: it must not
            raise
        except BaseException:
            self.caught["BaseException"] += 1
            raise
        return super().produce(topic, messages)


def test_the_fault_hook_raises_a_base_exception_that_except_exception_never_sees() -> None:
    doc = _adapter_doc()
    assert "a `BaseException` subclass" in doc
    assert "your `except Exception:` handlers do not run" in doc
    assert issubclass(InjectedCrash, BaseException) and not issubclass(InjectedCrash, Exception)
    _RollbackOnException.caught.update({"Exception": 0, "BaseException": 0})
    wrong = make_model_factory(_RollbackOnException)
    result = run_seed("smoke", 0, impl=wrong, steps=300, crash_rate=0.2)
    assert result.ok, result.divergence
    assert _RollbackOnException.caught["BaseException"] == result.stats.crashes_injected > 0
    assert _RollbackOnException.caught["Exception"] == 0
