"""The consumer side of the model: RocketMQ-style offset store, process queue and push
consumer, as docs/CONSUMER.md specifies. Pure Python over any ``model.api.MessageQueue``."""

from rmqsim.model.consumer.offsets import OffsetStore
from rmqsim.model.consumer.process_queue import Entry, ProcessQueue
from rmqsim.model.consumer.push import PushConsumerModel, SendHook

__all__ = ["Entry", "OffsetStore", "ProcessQueue", "PushConsumerModel", "SendHook"]
