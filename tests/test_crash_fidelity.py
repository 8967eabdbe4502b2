"""Issue 21: an in-process crash loses at least what a real SIGKILL loses, and the mutants
and names of the harness's former blind spots."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rmqsim.conformance.crashing.crash_sweep import (
    DEFAULT_SWEEP_STEPS,
    CrashCase,
    SweepResult,
    run_case,
    sweep_base,
)
from rmqsim.conformance.mutants.blind import POLL_CAP, UnloggedPositions
from rmqsim.conformance.reporting.anomalies import Before, classify_consume
from rmqsim.conformance.running.run import run_seed
from rmqsim.conformance.running.trace import write_lines
from rmqsim.conformance.searching.shrink import shrink_and_save
from rmqsim.conformance.searching.shrink_budget import DEFAULT_SHRINK_BUDGET
from rmqsim.impl import RocksMQ
from rmqsim.impl.errors import StorageError
from rmqsim.impl.storage import CRASH_HOLD_DIR_NAME
from rmqsim.model.api import ProducerMessage
from rmqsim.scenarios.queue.ops import Delivered, Outcome
from rmqsim.scenarios.queue.profiles import PROFILES

UNLOGGED = "rmqsim.conformance.mutants.blind:unlogged_positions"
REAL = "rmqsim.conformance.adapter:rocksmq_factory"
CAPPED = "rmqsim.conformance.mutants.blind:capped_poll"


class _UnloggedProduce(RocksMQ):
    unlogged_operations = frozenset({"produce"})


def _produce_then_crash(cls: type[RocksMQ], path: Path) -> int:
    mq = cls.open(path)
    mq.create_topic("t")
    mq.produce("t", [ProducerMessage(b"x", {})])
    mq.crash()
    assert not (path / CRASH_HOLD_DIR_NAME).exists()
    mq = cls.open(path)
    try:
        return mq.get_latest_msg("t")
    finally:
        mq.close()


def test_a_write_without_the_log_does_not_survive_crash(tmp_path: Path) -> None:
    # RocksDB flushed it while crash() let go of the database: a SIGKILL loses it.
    assert _produce_then_crash(_UnloggedProduce, tmp_path / "unlogged") == -1
    assert _produce_then_crash(RocksMQ, tmp_path / "logged") == 1
    # A clean close flushes it: durable.
    mq = _UnloggedProduce.open(tmp_path / "closed")
    mq.create_topic("t")
    mq.produce("t", [ProducerMessage(b"x", {})])
    mq.close()
    mq = _UnloggedProduce.open(tmp_path / "closed")
    assert mq.get_latest_msg("t") == 1
    mq.close()


def test_crash_restores_the_files_a_kill_leaves(tmp_path: Path) -> None:
    mq = UnloggedPositions.open(tmp_path)
    mq.create_topic("t")
    mq.create_consumer_group("t", "g")
    mq.produce("t", [ProducerMessage(b"x", {})])
    files = {name: os.stat(tmp_path / name).st_size for name in os.listdir(tmp_path)}
    mq.consume("t", "g", 1)  # unlogged: nothing reaches a file
    mq.crash()
    after = {name: os.stat(tmp_path / name).st_size for name in os.listdir(tmp_path)}
    held = {n for n in files if not n.startswith("LOG") and n != "LOCK"}
    assert {n: after.get(n) for n in held} == {n: files[n] for n in held}
    mq = UnloggedPositions.open(tmp_path)
    assert [m.msg_id for m in mq.consume("t", "g", 1)] == [1]  # handed out again
    mq.close()


_QUEUE_PROFILES = sorted(PROFILES)


def one_case_per_point(cases: list[CrashCase]) -> list[CrashCase]:
    """The sampled cases of a sweep: of each (operation, fault point) stratum, its last case
    (the one with the most history before the crash, so the most a kinder crash could keep),
    in sweep order. Deterministic: every crash point the sweep reaches, in every operation
    kind it reaches it in, is crashed at least once."""
    last: dict[tuple[str, str], CrashCase] = {}
    for case in cases:
        last[(case.during, case.point)] = case
    chosen = set(last.values())
    return [case for case in cases if case in chosen]


def test_one_case_per_point_keeps_every_stratum_once_in_sweep_order() -> None:
    cases = [
        CrashCase(0, "open", "open.before_write", 1),
        CrashCase(3, "produce", "produce.before_write", 1),
        CrashCase(5, "produce", "produce.before_write", 1),
        CrashCase(5, "produce", "produce.after_write", 1),
        CrashCase(7, "close_reopen", "open.before_write", 1),
        CrashCase(9, "produce", "produce.after_write", 1),
    ]
    assert one_case_per_point(cases) == [cases[0], cases[2], cases[4], cases[5]]


def _sampled_sweep(profile: str, impl: str, crash_mode: str) -> SweepResult:
    """The seed-0 crash sweep (default length) of ``profile`` in ``crash_mode``, with every
    case listed in ``cases`` but only ``one_case_per_point`` of them run (their digests in
    ``case_digests``, in the same order)."""
    base = sweep_base(profile, 0, impl=impl, steps=DEFAULT_SWEEP_STEPS, crash_mode=crash_mode)
    for case in one_case_per_point(base.result.cases):
        run_case(base.result, base.header, base.recorded, case, impl=impl, out=None)
    return base.result


@pytest.mark.slow
@pytest.mark.parametrize("profile", _QUEUE_PROFILES)
def test_inprocess_crash_recovers_what_a_real_kill_recovers(profile: str) -> None:
    """Differential: the seed-0 crash sweep (the default sweep length) lists the same cases
    in process and with a SIGKILL of a child, and one case of each (operation, fault
    point) of it (``one_case_per_point``) recovers, and goes on, exactly as with the
    SIGKILL at the same point. The queue is the real one with its polls written without
    the log (every other write is the real one's); where that queue's own run fails before
    any case, the real queue's sweep is compared as well."""
    impls = [UNLOGGED]
    inprocess = _sampled_sweep(profile, UNLOGGED, "inprocess")
    if not inprocess.cases:
        impls.append(REAL)
    for impl in impls:
        if impl != UNLOGGED:
            inprocess = _sampled_sweep(profile, impl, "inprocess")
        killed = _sampled_sweep(profile, impl, "process")
        assert inprocess.base.trace_lines[1:] == killed.base.trace_lines[1:], impl
        assert inprocess.cases == killed.cases, impl
        sampled = one_case_per_point(inprocess.cases)
        assert len(inprocess.case_digests) == len(killed.case_digests) == len(sampled), impl
        differing = [
            case.label()
            for case, mine, real in zip(
                sampled, inprocess.case_digests, killed.case_digests, strict=True
            )
            if mine != real
        ]
        assert not differing, (impl, differing)
        assert inprocess.cases or not inprocess.base.ok, impl


def _messages(first: int, last: int) -> tuple[Delivered, ...]:
    return tuple(Delivered(i, b"") for i in range(first, last + 1))


def test_a_poll_that_returns_the_first_messages_only_is_a_short_poll() -> None:
    want = Outcome(value=_messages(1, 500))
    before = Before(last_id=500, first_retained_id=1, position=1)
    assert classify_consume(want, Outcome(value=_messages(1, POLL_CAP)), before) == "short-poll"
    assert classify_consume(want, Outcome(value=()), before) == "short-poll"
    skipped = Outcome(value=(*_messages(1, 2), *_messages(4, 500)))
    assert classify_consume(want, skipped, before) == "poll-skip"
    # The last message alone missing: a skip of it looks the same (page-boundary-skip).
    assert classify_consume(want, Outcome(value=_messages(1, 499)), before) == "poll-skip"


def test_a_capped_poll_is_a_short_poll_and_shrinks_far_below_its_budget(tmp_path: Path) -> None:
    # Swarm seed 18 produces in bulk (SWARM_BULK_SHARE) and polls 5000 at a time.
    failed = run_seed("swarm", 18, impl=CAPPED)
    assert (failed.status, failed.anomaly) == ("divergence", "short-poll")
    failed.trace_path = tmp_path / "capped.jsonl"
    write_lines(failed.trace_path, failed.trace_lines)
    shrunk = shrink_and_save(failed, impl=CAPPED, budget=DEFAULT_SHRINK_BUDGET)
    assert shrunk is not None and shrunk.anomaly == "short-poll"
    stats = shrunk.shrink_stats
    assert stats is not None and stats.stopped_by is None  # searched to its end
    assert stats.operations < DEFAULT_SHRINK_BUDGET.max_operations // 10
    assert shrunk.steps <= 10


def test_a_crash_that_cannot_freeze_the_files_says_so_and_releases(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mq = RocksMQ.open(tmp_path)
    mq.create_topic("t")

    def no_links(*_args: object) -> None:
        raise OSError(1, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    with pytest.raises(StorageError, match=r"as a killed process would.*not permitted"):
        mq.crash()
    monkeypatch.undo()
    RocksMQ.open(tmp_path).close()  # released: the lock is free
