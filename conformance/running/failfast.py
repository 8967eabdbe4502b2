"""``rmqsim gate --max-failures N``: the gate stops starting new work once N failures are
known, as pytest's ``--maxfail`` does (docs/commands/gate.md#stopping-early).

A failure is what the gate's verdict counts: a failing profile run (or corpus replay) that
shows no listed deviation, a failing crash case (or failing sweep base run), a failing
power-cut case. The gate checks the count at fixed points of its own order, never in the
order a worker happens to finish: after each profile run in (profile, seed) order, after
each run a layer adds, after each crash sweep in profile order, after each steered group
in its order, after the power-loss sweeps. Every result counted at a point is one whose
predecessors in that order are all done, so the same seeds stop at the same point with the
same failures whatever ``--jobs`` is. Once the count reaches N the gate starts nothing after
that point (pending worker tasks are cancelled), shrinks the failures it has as usual and
writes its outputs, saying where it stopped and what it did not run."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = [
    "GateSoFar",
    "GateStop",
    "failure_count",
    "limit_reached",
    "stop_check",
    "stop_json",
    "stop_note",
]


@dataclass(slots=True)
class GateStop:
    """Where a gate stopped early: its ``--max-failures``, the failures known then, the
    point of its order it stopped after and what it did not run (one phrase each)."""

    max_failures: int
    failures: int
    after: str
    not_run: list[str] = field(default_factory=list)


class GateSoFar(Protocol):
    """What these functions read of a ``conformance.running.gate.GateResult`` (which
    imports this module)."""

    stopped: GateStop | None

    @property
    def failures(self) -> Sequence[Any]: ...
    @property
    def sweep_failures(self) -> Sequence[Any]: ...
    @property
    def power_sweeps(self) -> Sequence[Any]: ...
    def power_deviations(self) -> Sequence[Any]: ...


def failure_count(gate: GateSoFar) -> int:
    """The failures the verdict of ``gate`` counts so far (see the module's docstring)."""
    power_cases = sum(len(s.failures) + (s.base_problem is not None) for s in gate.power_sweeps)
    power = power_cases - len(gate.power_deviations())
    return len(gate.failures) + len(gate.sweep_failures) + power


def limit_reached(gate: GateSoFar, max_failures: int | None) -> bool:
    """Whether ``gate`` already knows ``max_failures`` failures (never, for None)."""
    return max_failures is not None and failure_count(gate) >= max_failures


def stop_check(
    gate: GateSoFar, max_failures: int | None, after: Callable[[], str]
) -> Callable[[], bool]:
    """A check for a stage's fixed points: true, and ``gate.stopped`` set (``after()``
    names the point), once ``gate`` knows ``max_failures`` failures."""

    def reached() -> bool:
        if gate.stopped is None and max_failures is not None and limit_reached(gate, max_failures):
            gate.stopped = GateStop(max_failures, failure_count(gate), after())
        return gate.stopped is not None

    return reached


def stop_json(stop: GateStop | None) -> dict[str, Any] | None:
    """``summary.json``'s ``stopped_early``: None for a gate that ran everything."""
    if stop is None:
        return None
    return {"max_failures": stop.max_failures, "failures": stop.failures, "after": stop.after,
            "not_run": list(stop.not_run)}


def stop_note(stop: GateStop) -> str:
    """One sentence for the terminal and the JUnit XML: where and why it stopped, and what
    it did not run."""
    skipped = "; ".join(stop.not_run) or "nothing"
    return (f"stopped early (--max-failures {stop.max_failures}): {stop.failures} failure(s) "
            f"known after {stop.after}; not run: {skipped}")
