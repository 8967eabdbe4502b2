"""Every stream mutant (``conformance.mutants.stream``) is killed by a test of this folder:
run against the mutant's streams (over RocksMQ) the test fails, against ``impl.stream`` it
passes. Each mutant names the test that kills it."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from pathlib import Path

import pytest

from rmqsim.conformance.mutants.stream import MUTANTS as ALL_MUTANTS
from rmqsim.impl import RocksMQ
from rmqsim.impl.stream import stream_factory
from rmqsim.model.stream.api import StreamFactory

from .conftest import NO_RETENTION, Maker, _zero_clock

#: mutant name -> the test (module of this folder, function) that kills it.
#: The mutants of the operation cells are caught by the gate's stream-args runs, not by a
#: contract test: tests/stream/test_stream_cells.py.
CELL_MUTANTS = ("latest-keeps-existing-group", "seek-unknown-channel-ignored",
                "forward-seek-ignored", "missing-id-seeks-to-latest")
MUTANTS = [m for m in ALL_MUTANTS if m.name not in CELL_MUTANTS]
KILLERS: dict[str, tuple[str, str]] = {
    "seek-first-position-only": ("test_plain_contract", "test_seek_applies_every_position"),
    "pre-seek-read-ahead-leaks": (
        "test_plain_contract",
        "test_an_existing_group_keeps_its_position",
    ),
    "seek-skipped-at-earliest": (
        "test_tt_contract",
        "test_resume_from_every_checkpoint_loses_and_repeats_nothing",
    ),
    "exclusive-seek-drops-next": ("test_peer_milvus", "test_mq_msg_stream_seek_invalid_message"),
    "seek-drops-by-begin-ts": ("test_tt_contract", "test_a_straddling_message_survives_a_resume"),
    "dedup-by-msg-id": (
        "test_tt_contract",
        "test_distinct_inserts_sharing_a_msg_id_are_all_delivered",
    ),
    "end-position-past-buffered": ("test_peer_milvus", "test_time_ticker_seek"),
    "non-increasing-tick-accepted": ("test_peer_milvus", "test_time_ticker_seek"),
    "pack-by-begin-ts": ("test_tt_contract", "test_membership_is_by_end_ts"),
    "late-write-delivered": (
        "test_tt_contract",
        "test_a_message_written_below_the_last_tick_is_never_delivered",
    ),
    "equal-ticks-only": (
        "test_tt_contract",
        "test_channels_with_different_ticks_advance_at_the_smallest",
    ),
    "lost-wakeup": ("test_tt_contract", "test_pack_holds_the_messages_of_its_tick_interval"),
    "repack-by-first-type": ("test_produce_contract", "test_delete_rows_are_split_by_key_too"),
}


def _maker(scratch: Path, factory_fn: Callable[..., StreamFactory]) -> tuple[Maker, list]:
    opened: list = []

    def make(config=NO_RETENTION, clock=_zero_clock) -> StreamFactory:
        queue = RocksMQ.open(scratch / f"queue-{len(opened)}", config=config, clock=clock)
        opened.append(queue)
        return factory_fn(queue=queue)

    return make, opened


def _run_killer(name: str, scratch: Path, factory_fn: Callable[..., StreamFactory]) -> None:
    """Run the killer test of mutant ``name`` on ``factory_fn``'s streams."""
    module_name, test_name = KILLERS[name]
    test = getattr(importlib.import_module(f"{__package__}.{module_name}"), test_name)
    make, opened = _maker(scratch, factory_fn)
    try:
        if "make_stream_factory" in inspect.signature(test).parameters:
            test(make_stream_factory=make)
        else:
            test(stream_factory=make())
    finally:
        for queue in opened:
            queue.close()


def test_there_are_at_least_ten_and_each_has_a_killer() -> None:
    assert len(MUTANTS) >= 10
    assert sorted(KILLERS) == sorted(m.name for m in MUTANTS)
    assert all(m.layer == "stream" for m in MUTANTS)


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_each_stream_mutant_is_killed(mutant, tmp_path: Path) -> None:
    module_name, attr = mutant.impl.split(":")
    factory_fn = getattr(importlib.import_module(module_name), attr)
    _run_killer(mutant.name, tmp_path / "impl", stream_factory)  # passes on the real streams
    with pytest.raises(Exception):  # noqa: B017 (any failure of the killer test)
        _run_killer(mutant.name, tmp_path / "mutant", factory_fn)
