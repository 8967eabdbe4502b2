"""Mutants of ``impl.RocksMQ`` for the harness's former blind spots (issue 21): bugs real
queues have that a default gate once let through.

- ``unlogged_positions``: a poll's batch written without RocksDB's write-ahead log. It
  survives a clean close and, before the in-process crash froze the directory's files,
  it survived ``crash()`` too (RocksDB flushed it on the way out); only a real kill lost it.
- ``two_step_destroy_topic``: a rare operation whose effect takes two batches, so a crash
  between them tears it.
- ``capped_poll``: a poll returns at most ``POLL_CAP`` messages while more are there; only
  polls over a big backlog show it.

Load with ``--impl conformance.mutants.blind:<factory>``.
"""

from __future__ import annotations

from rmqsim.conformance.mutants import Mutant
from rmqsim.conformance.mutants.base import factory_of
from rmqsim.impl import RocksMQ
from rmqsim.impl.storage import Plan
from rmqsim.model.api import ConsumerMessage

__all__ = [
    "MUTANTS",
    "POLL_CAP",
    "capped_poll",
    "two_step_destroy_topic",
    "unlogged_positions",
]

#: The most messages ``CappedPoll.consume`` returns.
POLL_CAP = 300


class UnloggedPositions(RocksMQ):
    """Bug class: write without the log (a batch written with ``disable_wal``).

    A poll's batch (the group's new position and the pages it acks) skips RocksDB's
    write-ahead log, "positions are cheap to lose". It is durable only once a memtable
    flush persists it; a crash before that hands the same messages out again. Uses the
    public seam ``RocksMQ.unlogged_operations``.
    """

    unlogged_operations = frozenset({"consume"})


class TwoStepDestroyTopic(RocksMQ):
    """Bug class: torn rare operation (one logical write split into two batches).

    ``destroy_topic`` deletes the messages first, then the topic record, its groups and
    pages in a second batch. A crash between the two (point
    ``destroy_topic.between_writes``) leaves a live topic whose messages are gone: a
    state neither before nor after the destroy. Topics are destroyed rarely, so only a
    crash armed at that point, inside that operation, finds it.
    """

    def write_plan(self, operation: str, plan: Plan) -> None:
        if operation != "destroy_topic":
            super().write_plan(operation, plan)
            return
        first = Plan(msg_range_deletes=plan.msg_range_deletes)
        second = Plan(meta_deletes=plan.meta_deletes, meta_range_deletes=plan.meta_range_deletes)
        self._fault("destroy_topic.before_write")
        self._store.write(first)
        self._fault("destroy_topic.between_writes")
        self._store.write(second)
        self._fault("destroy_topic.after_write")


class CappedPoll(RocksMQ):
    """Bug class: short read (a poll capped below what was asked while more is there).

    ``consume(n)`` hands out at most ``POLL_CAP`` messages, as a queue with a fixed read
    buffer would; the position moves past those only, so nothing is lost or skipped: the
    poll is short (anomaly ``short-poll``). Only a poll of more than ``POLL_CAP`` messages
    over a backlog of more than ``POLL_CAP`` shows it.
    """

    def consume(self, topic: str, group: str, n: int) -> list[ConsumerMessage]:
        return super().consume(topic, group, min(n, POLL_CAP) if n > 0 else n)


unlogged_positions = factory_of(UnloggedPositions)
two_step_destroy_topic = factory_of(TwoStepDestroyTopic)
capped_poll = factory_of(CappedPoll)

_MODULE = __name__
MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "unlogged-positions",
        "durability",
        "a poll's batch (position and acks) is written without the write-ahead log",
        f"{_MODULE}:unlogged_positions",
    ),
    Mutant(
        "two-step-destroy-topic",
        "crash-consistency",
        "destroy_topic deletes the messages, then the topic record and groups, in two batches",
        f"{_MODULE}:two_step_destroy_topic",
    ),
    Mutant(
        "capped-poll",
        "short-read",
        f"consume(n) returns at most {POLL_CAP} messages while more are available",
        f"{_MODULE}:capped_poll",
    ),
)
