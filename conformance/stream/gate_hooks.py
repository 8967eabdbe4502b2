"""The stream layer's part of the gate (``conformance.layer.GateHooks``): the summary holds
the stream cells of its runs (``stream_coverage``, ``conformance.stream.cells``), and after
the profile runs, runs of ``STREAM_STEER_PROFILE`` are aimed at the cells they left empty."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from rmqsim.conformance.crashing.crash_sweep import SweepResult
from rmqsim.conformance.layer import GateHooks
from rmqsim.conformance.running.run_result import RunResult
from rmqsim.conformance.stream.cells import cells_lines, cells_summary, steer_class
from rmqsim.scenarios.stream.profiles import SEEK_CLASSES

__all__ = [
    "MAX_STREAM_STEER_RUNS",
    "STREAM_GATE_HOOKS",
    "STREAM_STEER_PROFILE",
    "StreamGateHooks",
    "steer_seed",
    "stream_cells",
]

#: The profile whose runs the gate adds to hit the stream cells its profiles left empty,
#: and the most it adds.
STREAM_STEER_PROFILE = "stream-steer"
MAX_STREAM_STEER_RUNS = 24


def stream_cells(runs: Sequence[RunResult]) -> dict[str, Any]:
    """The stream cells of the stream ``runs`` (the steered ones included), and how many
    of them were steered: ``summary.json``'s ``stream_coverage``."""
    summary = cells_summary([r.stats.cells for r in runs], len(runs))
    summary["steered"] = sum(1 for r in runs if r.profile == STREAM_STEER_PROFILE)
    return summary


def steer_seed(cell: str, base: int) -> int:
    """A seed of ``STREAM_STEER_PROFILE`` beyond the gate's whose focus is ``cell``'s
    seek class (``stream_profiles.resolve_stream``), any seed's for another cell."""
    klass = steer_class(cell)
    if klass is None:
        return base
    return base * len(SEEK_CLASSES) + SEEK_CLASSES.index(klass)


class StreamGateHooks(GateHooks):
    """The stream layer's gate hooks (see the module's docstring)."""

    def summary(
        self, results: Sequence[RunResult], sweeps: Sequence[SweepResult],
        steered: Sequence[SweepResult],
    ) -> Mapping[str, Any]:
        """``stream_coverage``, when the gate ran a stream profile (``results`` are this
        layer's runs)."""
        return {"stream_coverage": stream_cells(results)} if results else {}

    def summary_lines(self, summary: Mapping[str, Any]) -> list[str]:
        stream = summary.get("stream_coverage")
        return [] if stream is None else cells_lines(stream, stream["steered"])

    def steering_runs(
        self, runs: Callable[[], Sequence[RunResult]], first_seed: int
    ) -> Iterator[tuple[str, int]]:
        """While a stream cell is still empty, at most ``MAX_STREAM_STEER_RUNS`` times,
        a run of ``STREAM_STEER_PROFILE`` whose seed aims its seeks at that cell's class.
        None when the gate ran no stream profile or one of its stream runs failed (that
        is the report)."""
        done = runs()
        if not done or not all(r.ok for r in done):
            return
        for attempt in range(MAX_STREAM_STEER_RUNS):
            empty = stream_cells(runs())["never_hit"]
            if not empty:
                return
            yield STREAM_STEER_PROFILE, steer_seed(empty[0], first_seed + attempt)


#: The stream layer's gate hooks (registered by ``conformance.layers.gate``).
STREAM_GATE_HOOKS = StreamGateHooks()
