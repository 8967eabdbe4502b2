"""What ``impl.stream`` adds beyond the contract (which every test of this folder checks
on it): its record is the model's byte for byte, and the threaded time-tick stream reads
each channel on a thread of its own and stops them on close."""

from __future__ import annotations

import threading
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from rmqsim.impl import RocksMQ
from rmqsim.impl.stream import ThreadedStreamFactory, ThreadedTtStream
from rmqsim.impl.stream.channel import ChannelReader
from rmqsim.impl.stream.codec import pack_record, unpack_record
from rmqsim.model.api import MQConfig
from rmqsim.model.stream.api import MsgType, Row, TsMsg
from rmqsim.model.stream.codec import decode_msg, encode_msg

from .helpers import insert_at, pack, tick

_U32 = st.integers(0, 2**32 - 1)
_U63 = st.integers(0, 2**63 - 1)
_U64 = st.integers(0, 2**64 - 1)


@st.composite
def _messages(draw: st.DrawFn) -> TsMsg:
    msg_type = draw(st.sampled_from(list(MsgType)))
    if msg_type in (MsgType.INSERT, MsgType.DELETE):
        rows = draw(st.lists(st.builds(Row, _U63, _U64), min_size=1, max_size=4))
        keys = draw(st.lists(_U32, min_size=len(rows), max_size=len(rows)))
        return TsMsg(
            msg_type, draw(_U63), 0, tuple(keys), draw(st.binary(max_size=16)), tuple(rows)
        )
    keys = draw(st.lists(_U32, max_size=3))
    return TsMsg(msg_type, draw(_U63), draw(_U64), tuple(keys), draw(st.binary(max_size=16)))


@given(_messages())
def test_the_record_is_the_models_byte_for_byte(msg: TsMsg) -> None:
    record = pack_record(msg)
    assert record == encode_msg(msg)
    assert unpack_record(record) == msg == decode_msg(record)


class _RecordingStream(ThreadedTtStream):
    """Notes which thread filled which channel."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.threads_by_channel: dict[str, set[str]] = {}

    def fill(self, reader: ChannelReader, last_tick: int) -> None:
        name = threading.current_thread().name
        self.threads_by_channel.setdefault(reader.name, set()).add(name)
        super().fill(reader, last_tick)


def test_threaded_stream_reads_each_channel_on_its_own_thread(tmp_path: Path) -> None:
    queue = RocksMQ.open(tmp_path / "q", config=MQConfig(retention_time_s=-1))
    try:
        producer = ThreadedStreamFactory(queue).new_msg_stream()
        producer.as_producer(["a", "b", "c"])
        consumer = _RecordingStream(queue)
        consumer.as_consumer(["a", "b", "c"], "g")
        for ts in (5, 10):
            producer.produce(pack(insert_at(ts - 1, key=0), insert_at(ts - 2, key=1)))
            producer.broadcast(tick(ts))
        assert [got.end_ts for got in (consumer.consume(), consumer.consume())] == [5, 10]
        threads = consumer.threads_by_channel
        assert sorted(threads) == ["a", "b", "c"]
        names = [next(iter(threads[channel])) for channel in ("a", "b", "c")]
        assert all(len(threads[channel]) == 1 for channel in threads)
        assert len(set(names)) == 3 and threading.current_thread().name not in names
        consumer.close()
        alive = {thread.name for thread in threading.enumerate()}
        assert not alive & set(names), "close() joins the reader threads"
    finally:
        queue.close()
