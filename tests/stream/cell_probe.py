"""A probe for tests/stream/test_stream_cells.py: our streams, recording each call where a
mutant of the new cell families (``conformance.mutants.stream``: the argument cells) would
act otherwise.

Each of those mutants overrides a call of our streams to change its argument or add an
action, decided by one function of the mutant module (``keep_latest_group``,
``consumed_only``, ``ForwardSeekIgnored.kept``, ``missing_ids``). The probe evaluates
that same function at the same call, on the same state, and names the mutant in
``TRIPPED`` when it would change anything; then it does what our streams do. A mutant
whose decision changes nothing in a run makes the calls our streams make with the same
arguments: its run is our streams' run, step for step. So a probe run that conforms and
names no mutant shows each of these mutants passes that seed; a seed that names one
must run that mutant itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rmqsim.conformance.mutants.stream import (
    ForwardSeekIgnored,
    consumed_only,
    keep_latest_group,
    missing_ids,
    stream_factory_of,
)
from rmqsim.impl.stream import PlainStream, TtStream
from rmqsim.model.stream.api import MsgPosition, SubscriptionPosition

__all__ = ["TRIPPED", "probe_factory"]

#: The mutants whose decision would have changed a call since the last ``clear()``.
TRIPPED: set[str] = set()


def _trip_if(changed: bool, mutant: str) -> None:
    if changed:
        TRIPPED.add(mutant)


def _unless_changed(kept: Any, positions: Any, mutant: str) -> Any:
    """What the mutant passes on (``kept``) when it holds the positions given; else
    ``positions``, as our streams, and the mutant is named."""
    if kept is positions or (isinstance(kept, list) and kept == list(positions)):
        return kept
    TRIPPED.add(mutant)
    return positions


class _ProbePlain(ForwardSeekIgnored):
    """Our plain stream (``ForwardSeekIgnored`` only for its bookkeeping of the highest
    id delivered per channel, which changes no call)."""

    def subscribe_channel(
        self, name: str, group: str, initial_position: SubscriptionPosition
    ) -> None:
        start = keep_latest_group(self, name, group, initial_position)
        _trip_if(start is not initial_position, "latest-keeps-existing-group")
        PlainStream.subscribe_channel(self, name, group, initial_position)

    def seek(self, positions: Sequence[MsgPosition], include_current: bool = False) -> None:
        kept = _unless_changed(consumed_only(self, positions), positions,
                               "seek-unknown-channel-ignored")  # fmt: skip
        PlainStream.seek(self, kept, include_current)

    def apply_seek(self, positions: Sequence[MsgPosition], include_current: bool) -> None:
        kept = _unless_changed(self.kept(positions), positions, "forward-seek-ignored")
        PlainStream.apply_seek(self, kept, include_current)
        _trip_if(bool(missing_ids(self.mq, positions)), "missing-id-seeks-to-latest")


class _ProbeTt(TtStream):
    """Our time-tick stream (two of the mutants change it)."""

    def subscribe_channel(
        self, name: str, group: str, initial_position: SubscriptionPosition
    ) -> None:
        start = keep_latest_group(self, name, group, initial_position)
        _trip_if(start is not initial_position, "latest-keeps-existing-group")
        super().subscribe_channel(name, group, initial_position)

    def seek(self, positions: Sequence[MsgPosition], include_current: bool = True) -> None:
        kept = _unless_changed(consumed_only(self, positions), positions,
                               "seek-unknown-channel-ignored")  # fmt: skip
        super().seek(kept, include_current)


#: ``--impl`` factory of the probe (a factory object: ``run_seed(..., impl=probe_factory)``).
probe_factory = stream_factory_of(_ProbePlain, _ProbeTt)
