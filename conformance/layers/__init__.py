"""The built-in layers, registered on import: the queue (``layers.queue``), the push
consumer (``layers.consumer``), the message streams (``layers.stream``) and the storage
layer (``layers.store``). See
``conformance.layer`` for what a layer supplies."""

from __future__ import annotations

from rmqsim.conformance.layer import register_layer
from rmqsim.conformance.layers.consumer import CONSUMER_LAYER
from rmqsim.conformance.layers.queue import QUEUE_LAYER
from rmqsim.conformance.layers.store import STORE_LAYER
from rmqsim.conformance.layers.stream import STREAM_LAYER

__all__ = ["CONSUMER_LAYER", "QUEUE_LAYER", "STORE_LAYER", "STREAM_LAYER"]

register_layer(QUEUE_LAYER)
register_layer(CONSUMER_LAYER)
register_layer(STREAM_LAYER)
register_layer(STORE_LAYER)
