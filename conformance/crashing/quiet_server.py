"""The body of a store's child in the power-loss sweep through FUSE (``power_fuse``): the
reference server, forked, with recovery's warnings not shown.

A module of its own, importing only what the fork server has already imported
(``conformance.wire.server``): a forked child unpickles its body by module and name, and
a body in ``power_fuse`` made every child import ``power_fuse`` and ``fuse_disk`` (and
``ctypes``) again, ~20 ms per open, when the fork server had started without them.
"""

from __future__ import annotations

import logging
from typing import Any

from rmqsim.conformance.wire.server import serve_forked

__all__ = ["serve_quietly"]


def serve_quietly(requests: Any, replies: Any, impl: str) -> None:
    """The forked child's body: the reference server, the commit log's recovery warnings
    (what every case provokes) not shown, as ``power_loss.quiet_recovery`` does in
    process; anything worse still reaches rmqsim's stderr."""
    logging.getLogger("rmqsim.impl.commitlog").setLevel(logging.ERROR)
    serve_forked(requests, replies, impl)
