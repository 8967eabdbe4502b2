"""Stream implementations for tests/test_wire_stream.py, served by the reference server.

``torn_streams``: our streams over a queue whose produce is two writes
(``conformance.mutants.crash.two_step_produce``), which the stream factory names as the
queue it runs over (``rmqsim_queue_factory``, as a stream server's factory does): a crash
between the two writes tears a stream produce.
"""

from __future__ import annotations

from rmqsim.conformance.mutants.crash import two_step_produce
from rmqsim.impl.stream import RocksStreamFactory, stream_factory
from rmqsim.model.api import MessageQueue


def torn_streams(*, queue: MessageQueue) -> RocksStreamFactory:
    return stream_factory(queue=queue)


torn_streams.rmqsim_queue_factory = two_step_produce  # type: ignore[attr-defined]  # its queue
