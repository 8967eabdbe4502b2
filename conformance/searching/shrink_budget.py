"""How far a shrink may search, and how far it went: plain values with no imports of the
runner, so the CLI can declare its options without loading the lockstep.

The bound is work, not time: a shrink may execute ``max_operations`` operations in its
candidate runs. Candidates come in a fixed order and each run is deterministic, so the same
failing run shrinks to the same trace on any machine (a wall-clock budget would give a
fast laptop and a slow CI runner different reproducers of one failure).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = [
    "DEFAULT_SHRINK_BUDGET",
    "DEFAULT_SHRINK_OPERATIONS",
    "STOPPED_BY_OPERATIONS",
    "STOPPED_BY_TIME",
    "OnRun",
    "ShrinkBudget",
    "ShrinkStats",
]

#: Default bound of one shrink: operations executed by its candidate runs. Measured here:
#: every seeded bug (``rmqsim mutants``) and every wrong consumer of the tests shrinks to
#: the end of its search within 31,000 (the most: a wrong consumer, 650 runs in 12.6 s).
#: Shrinking executes 2,000-7,000 queue operations per second and 600-2,500 consumer ones,
#: so spending the whole budget takes ≈15-50 s on queue runs and up to ≈3 min on consumer runs.
DEFAULT_SHRINK_OPERATIONS = 100_000
#: ``ShrinkStats.stopped_by``: what ended a search that did not run to its end.
STOPPED_BY_OPERATIONS = "operations"
STOPPED_BY_TIME = "time"


@dataclass(frozen=True, slots=True)
class ShrinkBudget:
    """How far one shrink may search.

    ``max_operations`` bounds it by work (the operations its candidate runs execute), so
    the result is the same on every machine. ``max_seconds``, off by default, also caps
    it by wall time: when that cap is what stops the search, the result depends on the
    machine's speed (``ShrinkStats.stopped_by`` is then ``"time"``).
    """

    max_operations: int = DEFAULT_SHRINK_OPERATIONS
    max_seconds: float | None = None

    def __post_init__(self) -> None:
        assert self.max_operations >= 1, self.max_operations
        assert self.max_seconds is None or self.max_seconds > 0, self.max_seconds


#: The default budget (frozen: one shared value serves as every default argument).
DEFAULT_SHRINK_BUDGET = ShrinkBudget()


@dataclass(frozen=True, slots=True)
class ShrinkStats:
    """How a shrink searched, for the report: candidate runs, the operations they executed,
    and what stopped it (None: it ran to its end, no pass shrinks the result further)."""

    runs: int
    operations: int
    stopped_by: str | None

    def describe(self) -> str:
        """One line on how final the result is, and how to reproduce it exactly."""
        spent = f"{self.runs} candidate runs, {self.operations:,} operations"
        if self.stopped_by is None:
            return f"searched to the end ({spent}): no pass shrinks it further"
        if self.stopped_by == STOPPED_BY_OPERATIONS:
            return f"stopped at the operations budget ({spent}): a larger one may shrink further"
        assert self.stopped_by == STOPPED_BY_TIME, self.stopped_by
        return (
            f"stopped by the time limit ({spent}): this result depends on the machine's speed; "
            f"an operations budget of {self.operations} and no time limit reproduces it anywhere"
        )


#: Told after every candidate run of a shrink how far it has gone (a progress bar: the
#: budget is operations, so ``operations / max_operations`` is the share spent).
OnRun = Callable[[ShrinkStats], None]
