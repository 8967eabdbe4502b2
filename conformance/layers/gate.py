"""The built-in layers' gate hooks (``conformance.layer.GateHooks``): the queue's
(coverage map, crash steering: ``conformance.queue.gate_hooks``) and the streams' (stream
cells, steered runs: ``conformance.stream.gate_hooks``). The consumer and storage layers add
nothing to the gate beyond their runs. ``conformance.running.gate`` registers them
(``register_builtin_gate_hooks``) when it is imported; the layers themselves are registered
by ``conformance.layers``."""

from __future__ import annotations

from rmqsim.conformance.layer import register_gate_hooks
from rmqsim.conformance.layers import QUEUE_LAYER, STREAM_LAYER
from rmqsim.conformance.queue.gate_hooks import QUEUE_GATE_HOOKS
from rmqsim.conformance.stream.gate_hooks import STREAM_GATE_HOOKS

__all__ = ["register_builtin_gate_hooks"]


def register_builtin_gate_hooks() -> None:
    """Register the built-in layers' gate hooks (again: the same objects)."""
    register_gate_hooks(QUEUE_LAYER.name, QUEUE_GATE_HOOKS)
    register_gate_hooks(STREAM_LAYER.name, STREAM_GATE_HOOKS)
