"""Crash at every named crash point of a script that exercises every operation: after
``crash()`` and reopen the state is exactly the state before or after the interrupted
operation (before for ``*.before_write``, after for ``*.after_write``), and the reopened
queue goes on to finish the script with the same results and final state as a clean run.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from impl_helpers.script import CONFIG, STEPS, ScriptClock

from rmqsim.impl import FAULT_POINTS, RocksMQ
from rmqsim.model.api import NotServingError, State

EMPTY = State.build({}, {})
OPEN_STEP = -1  # the step index of ``RocksMQ.open`` itself
CLOSE_STEP = len(STEPS)  # the step index of the final ``close``


class _Crash(Exception):
    """Raised by the fault hook: private, so nothing else can raise it."""


@dataclass(frozen=True)
class Hit:
    step: int
    point: str
    occurrence: int  # 1-based count of ``point`` so far in the run


@dataclass
class CleanRun:
    before: dict[int, State]
    after: dict[int, State]
    results: dict[int, Any]
    hits: list[Hit]
    final: State


def _clean_run(path: Path) -> CleanRun:
    """The script with a recording hook: snapshots around every step, every point hit."""
    hits: list[Hit] = []
    seen: Counter[str] = Counter()
    current = [OPEN_STEP]

    def record(point: str) -> None:
        assert point in FAULT_POINTS, point
        seen[point] += 1
        hits.append(Hit(current[0], point, seen[point]))

    clock = ScriptClock()
    mq = RocksMQ.open(path, CONFIG, clock=clock, faults=record)
    before = {OPEN_STEP: EMPTY}
    after = {OPEN_STEP: mq.snapshot()}
    results: dict[int, Any] = {}
    for index, (_, action) in enumerate(STEPS):
        current[0] = index
        before[index] = mq.snapshot()
        results[index] = action(mq, clock)
        after[index] = mq.snapshot()
    final = mq.snapshot()
    before[CLOSE_STEP] = after[CLOSE_STEP] = final
    current[0] = CLOSE_STEP
    mq.close()
    return CleanRun(before, after, results, hits, final)


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> CleanRun:
    return _clean_run(tmp_path_factory.mktemp("clean") / "db")


def test_the_script_passes_every_writing_point(clean: CleanRun) -> None:
    """The sweep below is only as good as the script: it must reach every crash point."""
    assert {hit.point for hit in clean.hits} == set(FAULT_POINTS)


def _hit_ids(hits: list[Hit]) -> list[str]:
    return [f"{h.step}-{h.point}-{h.occurrence}" for h in hits]


def _all_hits() -> list[Hit]:
    """Every point the script passes, found at collection time (one clean run)."""
    with tempfile.TemporaryDirectory() as tmp:
        return _clean_run(Path(tmp) / "db").hits


HITS = _all_hits()


@pytest.mark.parametrize("target", HITS, ids=_hit_ids(HITS))
def test_crash_at_point_leaves_before_or_after(
    target: Hit, clean: CleanRun, tmp_path: Path
) -> None:
    path = tmp_path / "db"
    seen: Counter[str] = Counter()

    def hook(point: str) -> None:
        seen[point] += 1
        if point == target.point and seen[point] == target.occurrence:
            raise _Crash(point)

    clock = ScriptClock()
    crashed_at: int | None = None
    mq: RocksMQ | None = None
    try:
        mq = RocksMQ.open(path, CONFIG, clock=clock, faults=hook)
        for index, (_, action) in enumerate(STEPS):
            try:
                action(mq, clock)
            except _Crash:
                crashed_at = index
                raise
        crashed_at = CLOSE_STEP
        mq.close()
        crashed_at = None
    except _Crash as exc:
        assert str(exc) == target.point, "the hook's exception must propagate unchanged"
        if crashed_at is None:
            crashed_at = OPEN_STEP
    assert crashed_at == target.step, f"crashed in step {crashed_at}, expected {target.step}"
    if mq is not None:
        with pytest.raises(NotServingError):  # a failed instance refuses to go on
            mq.get_latest_msg("a")
        mq.crash()

    reopened = RocksMQ.open(path, CONFIG, clock=clock)
    try:
        state = reopened.snapshot()
        before, after = clean.before[target.step], clean.after[target.step]
        assert state in (before, after), "a crash left a mix of before and after"
        expected = before if target.point.endswith("before_write") else after
        assert state == expected

        # The reopened queue finishes the script exactly as the clean run did.
        resume = target.step if state == before and target.step >= 0 else target.step + 1
        for index in range(max(resume, 0), len(STEPS)):
            result = STEPS[index][1](reopened, clock)
            assert result == clean.results[index], f"step {index}: {STEPS[index][0]}"
        assert reopened.snapshot() == clean.final
    finally:
        reopened.close()
