"""``rmqsim bench``'s figures as data: one record per figure, with its target and verdict.

Every figure the bench prints is a ``Figure``: a stable name, a value, a unit and, when the
project set one, a target with the side that meets it (``higher``: value >= target;
``lower``: value <= target). The verdicts the bench prints come from here and only from
here, so a target is never printed without "met" or "MISSED", and a figure without a
target gets no verdict. ``--json PATH`` writes one JSON object per line per figure
(``records``); ``bench/history.jsonl`` keeps the dated figures of earlier runs in the same
form, and the documentation site plots it (``docs/hooks/bench_history.py``).

A record: ``name``, ``value``, ``unit``, ``target`` (a number or null), ``better``
(``"higher"`` or ``"lower"``, null without a target), ``met`` (true, false, or null without
a target), ``load_average`` (1, 5 and 15 minutes, or null), ``cpus`` (the CPUs the process
may use), ``commit`` (git, or null), ``date`` (UTC, ISO 8601), ``params`` (the command's
sizes: messages, repeats, seeds, check cadence).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = [
    "RECORD_FIELDS",
    "Figure",
    "machine",
    "records",
    "verdict_lines",
    "write_records",
]

#: The fields of a record, in order (``tests/test_bench_json.py`` holds the history to them).
RECORD_FIELDS = ("name", "value", "unit", "target", "better", "met", "load_average", "cpus",
                 "commit", "date", "params")


@dataclass(frozen=True, slots=True)
class Figure:
    """One measured figure and, when there is one, its target."""

    name: str
    value: float
    unit: str
    target: float | None = None
    better: str = "higher"

    @property
    def met(self) -> bool | None:
        """Whether the target is met (None: there is no target)."""
        if self.target is None:
            return None
        return self.value >= self.target if self.better == "higher" else self.value <= self.target

    def verdict(self) -> str:
        """``"met"``, ``"MISSED"``, or ``"-"`` for a figure without a target."""
        if self.met is None:
            return "-"
        return "met" if self.met else "MISSED"

    def target_text(self) -> str:
        """``>= 0.5``, ``<= 3`` (empty without a target)."""
        if self.target is None:
            return ""
        return f"{'>=' if self.better == 'higher' else '<='} {self.target:,g}"


def _value_text(figure: Figure) -> str:
    if figure.unit == "x":
        return f"{figure.value:.2f}x"
    return f"{figure.value:,.0f} {figure.unit}"


def verdict_lines(figures: Iterable[Figure]) -> list[str]:
    """One line per figure that has a target: its value, the target, met or MISSED."""
    return [f"target {f.name} {f.target_text()}{'x' if f.unit == 'x' else ' ' + f.unit}: "
            f"{_value_text(f)}, {f.verdict()}" for f in figures if f.target is not None]


def machine() -> dict[str, Any]:
    """What a record says of the run: load average, CPUs, commit and date."""
    from rmqsim.conformance.layer import git_commit

    try:
        load: list[float] | None = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    return {
        "load_average": load,
        "cpus": len(os.sched_getaffinity(0)),
        "commit": git_commit(),
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def records(figures: Sequence[Figure], run: dict[str, Any],
            params: dict[str, Any]) -> list[dict[str, Any]]:
    """The JSON records of ``figures``, each with the run's ``machine()`` facts."""
    return [
        {
            "name": f.name,
            "value": round(f.value, 4),
            "unit": f.unit,
            "target": f.target,
            "better": f.better if f.target is not None else None,
            "met": f.met,
            "load_average": run["load_average"],
            "cpus": run["cpus"],
            "commit": run["commit"],
            "date": run["date"],
            "params": params,
        }
        for f in figures
    ]


def write_records(rows: Sequence[dict[str, Any]], where: str) -> None:
    """JSON Lines to ``where``: a file (replaced), or standard output for ``-``."""
    text = "".join(json.dumps(row, sort_keys=False) + "\n" for row in rows)
    if where == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        Path(where).write_text(text, encoding="utf-8")
