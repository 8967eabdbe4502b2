"""The time-tick stream's guarantees over random logs (hypothesis, derandomized):
intervals, chaining, exactly-once delivery of every message written above its channel's
last tick, and resume from any checkpoint."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmqsim.model.stream.api import MsgPack, MsgStream, StreamFactory, TsMsg
from tests.stream.conftest import Maker

from .helpers import drain, insert, tick

CHANNELS = ("a", "b", "c")

#: ("insert", channel, ts offset from the channel's last tick (may be <= 0: late), row span)
#: ("tick", channel, increment (may be <= 0: a repeated or older tick))
#: ("consume",)
steps = st.lists(
    st.one_of(
        st.tuples(
            st.just("insert"), st.sampled_from(CHANNELS), st.integers(-2, 6), st.integers(0, 8)
        ),
        st.tuples(st.just("tick"), st.sampled_from(CHANNELS), st.integers(-2, 6)),
        st.tuples(st.just("consume")),
    ),
    max_size=40,
)


@dataclass
class _Log:
    """Writes the program's messages and remembers which ones must be delivered."""

    factory: StreamFactory
    producers: dict[str, MsgStream] = field(default_factory=dict)
    last_tick: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CHANNELS, 0))
    expected: set[tuple[str, int]] = field(default_factory=set)
    next_msg_id: int = 1

    def __post_init__(self) -> None:
        for channel in CHANNELS:
            producer = self.factory.new_msg_stream()
            producer.as_producer([channel])
            producer.set_repack_func(lambda msgs, buckets: {0: list(msgs)})  # rows stay together
            self.producers[channel] = producer

    def insert(self, channel: str, offset: int, span: int) -> None:
        low = max(0, self.last_tick[channel] + offset)
        msg = insert(self.next_msg_id, (1, low, 0), (2, low + span, 0))
        self.next_msg_id += 1
        (queue_id,) = self.producers[channel].produce(MsgPack.of(msg))[channel]
        if msg.end_ts > self.last_tick[channel]:
            self.expected.add((channel, queue_id))

    def tick(self, channel: str, increment: int) -> None:
        ts = max(0, self.last_tick[channel] + increment)
        self.producers[channel].broadcast(tick(ts))
        self.last_tick[channel] = max(self.last_tick[channel], ts)


def _delivered(packs: list[MsgPack]) -> list[tuple[str, int]]:
    return [(m.position.channel, m.position.queue_id) for p in packs for m in p.msgs]


def _shape(packs: list[MsgPack]) -> list[tuple[int, int, tuple[TsMsg, ...]]]:
    return [(p.begin_ts, p.end_ts, p.msgs) for p in packs]


@settings(
    max_examples=60,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],  # the maker is stateless
)
@given(program=steps)
def test_time_tick_stream_guarantees(make_stream_factory: Maker, program: list[tuple]) -> None:
    factory = make_stream_factory()
    log = _Log(factory)
    consumer = factory.new_tt_msg_stream()
    consumer.as_consumer(list(CHANNELS), "g")
    packs: list[MsgPack] = []
    for step in program:
        if step[0] == "insert":
            log.insert(*step[1:])
        elif step[0] == "tick":
            log.tick(*step[1:])
        elif (got := consumer.consume()) is not None:
            packs.append(got)
    final = max(log.last_tick.values()) + 100
    for channel in CHANNELS:
        log.tick(channel, final - log.last_tick[channel])
    packs += drain(consumer)

    assert packs[-1].end_ts == final  # liveness: every channel passed every tick
    for previous, got in zip([None, *packs], packs, strict=False):
        assert got.begin_ts == (0 if previous is None else previous.end_ts) < got.end_ts
        for msg in got.msgs:
            assert got.begin_ts < msg.end_ts <= got.end_ts
    delivered = _delivered(packs)
    assert len(delivered) == len(set(delivered))
    assert set(delivered) == log.expected

    for index in range(0, len(packs), 3):  # resume from a sample of checkpoints
        resumed = factory.new_tt_msg_stream()
        resumed.as_consumer(list(CHANNELS), f"r{index}")
        resumed.seek(list(packs[index].end_positions))
        assert _shape(drain(resumed)) == _shape(packs[index + 1 :])
