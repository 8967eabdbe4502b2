"""Named crash points and the hook type.

``RocksMQ`` calls ``faults(point)`` at each point below, with the point's name. A harness
makes the hook raise to stop the operation exactly there, then calls ``RocksMQ.crash()``
and reopens the path: the state must equal the state before or after the interrupted
operation. Whatever the hook raises propagates unchanged; the instance is then *failed*
(every later call but ``close()``/``crash()`` raises ``NotServingError``), because its
in-memory caches may no longer match the disk.

Every operation that writes writes exactly one RocksDB ``WriteBatch``, so each has exactly
two points, ``<op>.before_write`` and ``<op>.after_write``; there is no operation with
more than one step to put points between. An operation that has nothing to write (a
``consume`` that returns nothing, a retention pass that deletes nothing, ``produce([])``,
destroying an absent group) writes no batch and passes no point. ``open.*`` are passed
only when ``open`` initialises a new database; ``close.*`` around the final flush.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["FAULT_POINTS", "FaultHook", "write_points"]

#: ``faults(point)``: called at every crash point; raise to crash there.
FaultHook = Callable[[str], None]

#: The operations that write one batch each, in the order SPEC.md lists them.
WRITING_OPERATIONS: tuple[str, ...] = (
    "open",
    "create_topic",
    "destroy_topic",
    "create_consumer_group",
    "destroy_consumer_group",
    "produce",
    "consume",
    "seek",
    "seek_to_latest",
    "retention",
)


def write_points(operation: str) -> tuple[str, str]:
    """The two crash points around ``operation``'s write batch."""
    assert operation in WRITING_OPERATIONS, operation
    return f"{operation}.before_write", f"{operation}.after_write"


#: Every named crash point, in a stable order.
FAULT_POINTS: tuple[str, ...] = (
    *(point for operation in WRITING_OPERATIONS for point in write_points(operation)),
    "close.before_flush",
    "close.after_flush",
)
