"""The life of an open queue, shared by both backends: serving until ``close()``,
``crash()`` or a failure at a crash point, and after that ``NotServingError`` for every
operation (SPEC "Errors"), with a reason that says which of the three ended it."""

from __future__ import annotations

from rmqsim.model.api import NotServingError

__all__ = ["CLOSED", "CRASHED", "FAILED", "SERVING", "check_serving"]

SERVING = "serving"
CLOSED = "closed"
#: An operation raised at a crash point (the fault hook): the queue must be crashed and
#: reopened, as a process killed there would be.
FAILED = "failed"
CRASHED = "crashed"

_NOT_SERVING_REASONS = {
    CLOSED: "the queue is closed",
    CRASHED: "the queue crashed (crash() was called)",
    FAILED: "the queue failed at a crash point; crash() and reopen it",
}


def check_serving(state: str) -> None:
    """``NotServingError`` naming why, unless ``state`` is ``SERVING``."""
    if state != SERVING:
        raise NotServingError(_NOT_SERVING_REASONS[state])
