"""The wire protocol (docs/PROTOCOL.md): an implementation in another process, in any
language, speaking newline-delimited JSON over its stdin and stdout.

``codec`` holds the values both ends exchange, ``child`` the child process, ``client``
rmqsim's end (``--impl exec:COMMAND``), ``server`` the reference server over any Python
queue factory, ``check`` the protocol test suite (``rmqsim protocol-check``). The stream
layer's end is in modules of its own: ``stream_codec`` (its values), ``streams``
(rmqsim's end: ``WireStreams`` over a stream server's own queue), ``stream_server`` (the
reference server's stream operations) and ``stream_check`` (its protocol-check).
"""

__all__: list[str] = []
