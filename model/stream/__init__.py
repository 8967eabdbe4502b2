"""The message-stream layer of the model (docs/STREAM.md): Milvus's plain and time-tick
message streams over a queue, in executable form.

``model.stream.api`` is the contract (values, errors, protocols) and ``model.stream.codec``
the message encoding; both may be imported by implementations. The model streams run on
any ``MessageQueue``, a ``ReferenceMQ`` by default.
"""

from rmqsim.model.stream.reference import (
    PlainStreamModel,
    StreamModelFactory,
    TtStreamModel,
    default_repack,
)

__all__ = ["PlainStreamModel", "StreamModelFactory", "TtStreamModel", "default_repack"]
