"""The built-in layers, registered on import: the queue (``layers.queue``), the push
consumer (``layers.consumer``), the message streams (``layers.stream``) and the storage
layer (``layers.store``). See
``conformance.layer`` for what a layer supplies."""

from __future__ import annotations

from rmqsim.conformance.consumer.layer import CONSUMER_LAYER
from rmqsim.conformance.layer import register_layer
from rmqsim.conformance.queue.layer import QUEUE_LAYER
from rmqsim.conformance.store.layer import STORE_LAYER
from rmqsim.conformance.stream.layer import STREAM_LAYER

__all__ = ["CONSUMER_LAYER", "QUEUE_LAYER", "STORE_LAYER", "STREAM_LAYER"]

register_layer(QUEUE_LAYER)
register_layer(CONSUMER_LAYER)
register_layer(STREAM_LAYER)
register_layer(STORE_LAYER)
