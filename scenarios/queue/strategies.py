"""Hypothesis strategies for the vocabulary: any valid op, outcome or step.

For property tests of the codec and for hypothesis-driven fuzzers and shrinkers that want to
generate raw operations. Not imported by ``scenarios/__init__`` so that using the simulations
does not import hypothesis.
"""

from __future__ import annotations

from hypothesis import strategies as st

from rmqsim.scenarios.names import CASE_PAIRS, NORMALIZATION_PAIRS
from rmqsim.scenarios.queue.ops import (
    ERROR_KINDS,
    OP_KINDS,
    AdvanceClock,
    ArmCrash,
    CloseReopen,
    Consume,
    CrashReopen,
    CreateGroup,
    CreateTopic,
    Delivered,
    DestroyGroup,
    DestroyTopic,
    ExistGroup,
    GetLatest,
    Message,
    Op,
    Outcome,
    Produce,
    RunRetention,
    Seek,
    SeekToLatest,
    Step,
)

__all__ = ["deliveries", "messages", "names", "ops", "outcomes", "properties", "steps"]

#: Any string, valid as a name or not (names are checked by the queue, not the vocabulary),
#: including names that differ only by case or only by Unicode normalization (NFC vs NFD),
#: which a codec or a trace must keep apart. Lone surrogates are excluded: they are invalid
#: names but not representable in UTF-8 JSON written with ensure_ascii=False.
names = st.text(max_size=12) | st.sampled_from(
    ("t", "t1", "t10", "x" * 4096, "x" * 4097, CASE_PAIRS[0][1], *NORMALIZATION_PAIRS[0])
)
ints = st.integers() | st.sampled_from((0, -1, 9, 10, 2**63 - 1, 2**63, 2**64))
properties = st.dictionaries(st.text(max_size=6), st.text(max_size=6), max_size=4).map(
    lambda d: tuple(sorted(d.items()))
)
messages = st.builds(Message, payload=st.binary(max_size=32), properties=properties)
deliveries = st.builds(
    Delivered, msg_id=ints, payload=st.binary(max_size=32), properties=properties
)

_BY_KIND: dict[str, st.SearchStrategy[Op]] = {
    "create_topic": st.builds(CreateTopic, names),
    "destroy_topic": st.builds(DestroyTopic, names),
    "create_group": st.builds(CreateGroup, names, names),
    "destroy_group": st.builds(DestroyGroup, names, names),
    "exist_group": st.builds(ExistGroup, names, names),
    "produce": st.builds(Produce, names, st.lists(messages, max_size=4).map(tuple)),
    "consume": st.builds(Consume, names, names, ints),
    "seek": st.builds(Seek, names, names, ints),
    "seek_to_latest": st.builds(SeekToLatest, names, names),
    "get_latest": st.builds(GetLatest, names),
    "advance_clock": st.builds(AdvanceClock, ints),
    "run_retention": st.just(RunRetention()),
    "crash_reopen": st.just(CrashReopen()),
    "close_reopen": st.just(CloseReopen()),
    "arm_crash": st.builds(
        ArmCrash, st.integers(min_value=1, max_value=2**40), st.none() | st.text(max_size=12)
    ),
}
assert tuple(_BY_KIND) == OP_KINDS

#: Any operation of the vocabulary.
ops: st.SearchStrategy[Op] = st.one_of(*_BY_KIND.values())

#: Any outcome: an error kind, or a value of one of the shapes operations return.
outcomes: st.SearchStrategy[Outcome] = (st.sampled_from(ERROR_KINDS) | st.text(min_size=1)).map(
    lambda kind: Outcome(error=kind)
) | st.builds(
    Outcome,
    value=st.none()
    | st.booleans()
    | ints
    | st.lists(ints, max_size=5).map(tuple)
    | st.lists(deliveries, max_size=4).map(tuple),
)

#: Any step.
steps: st.SearchStrategy[Step] = st.builds(
    Step, time_s=st.integers(min_value=0, max_value=2**40), actor=st.text(max_size=12), op=ops
)
