"""The stream layer's harness parts (docs/STREAM.md): ``side`` applies the stream
simulation's operations to one stream factory."""

from __future__ import annotations

from rmqsim.conformance.stream.side import NO_STREAM, StreamSide, pack_to_plain, to_ts_msg

__all__ = ["NO_STREAM", "StreamSide", "pack_to_plain", "to_ts_msg"]
