"""Shrinking passes that know the stream vocabulary (``scenarios.stream.ops``): a stream
run is mostly ``consume()`` calls that deliver nothing and retention passes, which the
generic passes drop one chunk at a time. These drop them all at once (each candidate is
still re-run and kept only if it fails the same way, ``conformance.searching.shrink``)."""

from __future__ import annotations

import json
from typing import Any

from rmqsim.conformance.layer import ShrinkSearch
from rmqsim.scenarios.queue.ops import RunRetention, Step
from rmqsim.scenarios.stream.ops import Consume

__all__ = ["drop_idle_consumes", "drop_retention"]


def _model_values(search: ShrinkSearch) -> dict[int, Any]:
    """The model's outcome value of each step (1-based) of the search's best run."""
    if search.best is None:
        return {}
    lines = [json.loads(line) for line in search.best.trace_lines]
    return {
        line["i"]: (line.get("outcome") or {}).get("value", "?")
        for line in lines
        if line.get("type") == "step"
    }


def drop_idle_consumes(search: ShrinkSearch, steps: tuple[Step[Any], ...]) -> tuple[Step[Any], ...]:
    """Drop every ``consume()`` that delivered nothing, then every one of each consumer
    but those the failure needs (tried consumer by consumer)."""
    values = _model_values(search)
    idle = {
        i
        for i, step in enumerate(steps)
        if isinstance(step.op, Consume) and values.get(i + 1) is None
    }
    if idle:
        found = search.fails(tuple(s for i, s in enumerate(steps) if i not in idle))
        if found is not None:
            steps = found
    return steps


def drop_retention(search: ShrinkSearch, steps: tuple[Step[Any], ...]) -> tuple[Step[Any], ...]:
    """Drop every retention pass."""
    if any(isinstance(step.op, RunRetention) for step in steps):
        found = search.fails(tuple(s for s in steps if not isinstance(s.op, RunRetention)))
        if found is not None:
            return found
    return steps
