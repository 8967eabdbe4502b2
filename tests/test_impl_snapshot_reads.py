"""``RocksMQ.snapshot`` reads every record from disk but decodes each message record once:
the decoded message is shared by the snapshots that list it, so it must be read-only,
must never leak into what ``consume`` hands out, and a damaged record must be refused
every time it is read, never remembered."""

from __future__ import annotations

import copy
import pickle
from pathlib import Path

import pytest
from impl_helpers.script import CONFIG, pm

from rmqsim.impl import RocksMQ, keys, loader
from rmqsim.impl.codec import FrozenProperties
from rmqsim.impl.errors import CorruptDatabaseError
from rmqsim.impl.storage import Plan
from rmqsim.model.api import ConsumerMessage


@pytest.fixture
def mq(tmp_path: Path):
    opened = RocksMQ.open(tmp_path / "db", CONFIG, clock=lambda: 100)
    opened.create_topic("t")
    opened.create_consumer_group("t", "g")
    assert opened.produce("t", [pm(b"a", k="v"), pm(b"b")]) == [1, 2]
    yield opened
    opened.close()


def test_snapshot_messages_are_read_only_and_equal_to_plain_ones(mq: RocksMQ) -> None:
    first = mq.snapshot()
    messages = first.topics["t"].messages
    assert messages == (ConsumerMessage(1, b"a", {"k": "v"}), ConsumerMessage(2, b"b", {}))
    assert all(type(m.properties) is FrozenProperties for m in messages)
    with pytest.raises(TypeError):
        messages[0].properties["k"] = "changed"  # type: ignore[index]
    # Process mode pipes a snapshot's topics to the parent, pickled.
    assert pickle.loads(pickle.dumps(dict(first.topics))) == first.topics
    # The one-topic snapshot decodes through the same cache: the same objects.
    tail = mq.snapshot(topics=["t"], messages_from={"t": 2}).topics["t"].messages
    assert tail == messages[1:] and tail[0] is messages[1]
    assert mq.snapshot() == first and mq.snapshot().topics["t"].messages[0] is messages[0]


def test_a_large_message_is_decoded_on_every_read_not_cached(mq: RocksMQ) -> None:
    big = b"x" * (loader.MESSAGE_CACHE_VALUE_BYTES_MAX + 1)
    assert mq.produce("t", [pm(big, k="v")]) == [3]
    first, again = (mq.snapshot().topics["t"].messages for _ in range(2))
    assert first == again and first[2].payload == big
    assert first[2] is not again[2] and first[1] is again[1]  # only small ones are shared
    assert type(first[2].properties) is FrozenProperties


def test_consumed_messages_are_fresh_and_cannot_change_a_snapshot(mq: RocksMQ) -> None:
    before = mq.snapshot()
    got = mq.consume("t", "g", 1)
    assert type(got[0].properties) is dict
    got[0].properties["k"] = "changed"  # the caller's own copy
    after = mq.snapshot()
    assert after.topics["t"].messages == before.topics["t"].messages
    assert after.topics["t"].messages[0].properties == {"k": "v"}


def test_a_damaged_message_record_is_refused_on_every_read(mq: RocksMQ) -> None:
    store = mq._store
    incarnation = mq._topics["t"].incarnation
    store.write(Plan(msg_puts=[(keys.msg_key(incarnation, 2), b"\x7fnot an encoding")]))
    for _ in range(2):
        with pytest.raises(CorruptDatabaseError, match="unknown encoding tag"):
            mq.snapshot()
        with pytest.raises(CorruptDatabaseError, match="unknown encoding tag"):
            mq.snapshot(topics=["t"], messages_from={"t": 1})


@pytest.mark.parametrize(
    "change",
    [
        lambda p: p.__setitem__("k", "x"),
        lambda p: p.__delitem__("k"),
        lambda p: p.update(k="x"),
        lambda p: p.setdefault("n", "x"),
        lambda p: p.pop("k"),
        lambda p: p.popitem(),
        lambda p: p.clear(),
        lambda p: p.__ior__({"k": "x"}),
    ],
)
def test_frozen_properties_refuse_every_change(change) -> None:
    properties = FrozenProperties({"k": "v"})
    with pytest.raises(TypeError, match="read-only"):
        change(properties)
    assert properties == {"k": "v"}


def test_frozen_properties_print_pickle_and_copy_like_a_dict() -> None:
    properties = FrozenProperties({"k": "v"})
    assert repr(properties) == "{'k': 'v'}" and properties == {"k": "v"}
    for again in (pickle.loads(pickle.dumps(properties)), copy.deepcopy(properties)):
        assert type(again) is FrozenProperties and again == {"k": "v"}
    message = ConsumerMessage(1, b"a", properties)
    assert pickle.loads(pickle.dumps(message)) == ConsumerMessage(1, b"a", {"k": "v"})
