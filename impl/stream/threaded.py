"""``ThreadedTtStream``: the time-tick stream with a reader thread per channel, as Milvus's
``MqTtMsgStream`` starts a goroutine per lagging channel and waits for all of them before
it cuts a pack.

``consume()`` hands every lagging channel to its own reader thread (each runs
``TtStream.fill`` on its channel only, so the threads share no state but the queue, whose
operations are thread-safe), waits for all, then cuts the pack on the calling thread. The
outcome is the deterministic core's: each channel's reading depends only on that channel.
``close()`` stops and joins the readers.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor, wait

from rmqsim.impl.stream.channel import ChannelReader
from rmqsim.impl.stream.core import TtStream
from rmqsim.model.api import MessageQueue
from rmqsim.model.stream.api import SubscriptionPosition

__all__ = ["ThreadedTtStream"]

#: How long consume() waits for a reader thread, in real seconds.
READ_TIMEOUT_S = 60.0


class ThreadedTtStream(TtStream):
    """A ``TtStream`` whose channels are read by a thread each."""

    def __init__(self, mq: MessageQueue) -> None:
        super().__init__(mq)
        self.reader_threads: dict[str, ThreadPoolExecutor] = {}

    def subscribe_channel(
        self, name: str, group: str, initial_position: SubscriptionPosition
    ) -> None:
        super().subscribe_channel(name, group, initial_position)
        self.reader_threads[name] = ThreadPoolExecutor(1, thread_name_prefix=f"tt-reader-{name}")

    def fill_lagging(self, readers: list[ChannelReader]) -> None:
        last_tick = self.last_tick
        running: list[Future[None]] = [
            self.reader_threads[reader.name].submit(self.fill, reader, last_tick)
            for reader in readers
            if reader.tick <= last_tick
        ]
        _done, late = wait(running, timeout=READ_TIMEOUT_S)
        if late:
            raise TimeoutError(f"{len(late)} channel readers still busy after {READ_TIMEOUT_S} s")
        for future in running:  # every reader finished: raise the first error, in order
            future.result()

    def close(self) -> None:
        super().close()
        for pool in self.reader_threads.values():
            pool.shutdown(wait=True)
