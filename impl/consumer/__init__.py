"""The consumer side of ``impl``: a RocketMQ-style push consumer on ``impl.RocksMQ``.

- ``core``          ``ConsumerCore``: the state machine (process queues, offsets, retry and
                    dead-letter sends, flow control), one lock, no threads of its own;
- ``push``          ``PushConsumer``: pull thread, worker pool, persist thread around a core;
- ``offsets``       ``RocksOffsetStore``: committed offsets, persisted in a RocksDB of its own;
- ``process_queue`` the sorted per-queue cache.

The rules are docs/CONSUMER.md; ``model.consumer`` is their executable reference.
"""

from rmqsim.impl.consumer.core import ConsumerCore, SendHook
from rmqsim.impl.consumer.offsets import RocksOffsetStore
from rmqsim.impl.consumer.process_queue import Cached, ProcessQueue
from rmqsim.impl.consumer.push import Handler, PushConsumer, PushOptions

__all__ = [
    "Cached",
    "ConsumerCore",
    "Handler",
    "ProcessQueue",
    "PushConsumer",
    "PushOptions",
    "RocksOffsetStore",
    "SendHook",
]
