"""Mutants of ``impl.RocksMQ`` for the three bug kinds a new user planted in an own queue
(issue 26), each catchable by the harness and each once missed by ``rmqsim fuzz``:

- ``unread_group_holds_nothing``: a group at position -1 (read nothing) does not hold its
  topic's pages back from acks, so retention deletes messages it never read;
- ``seek_lands_on_oldest``: a seek to an id retention has deleted lands on the oldest
  retained message instead of resetting the position to -1;
- ``produce_in_two_transactions``: a produce of several messages commits the first half,
  then the second half, in two transactions; a crash between them leaves half.

Load with ``--impl rmqsim.conformance.mutants.newcomer:<factory>``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rmqsim.conformance.mutants import Mutant
from rmqsim.conformance.mutants.base import factory_of
from rmqsim.impl import RocksMQ
from rmqsim.model.api import ProducerMessage, validate_messages, validate_name

__all__ = [
    "MUTANTS",
    "produce_in_two_transactions",
    "seek_lands_on_oldest",
    "unread_group_holds_nothing",
]


class UnreadGroupHoldsNothing(RocksMQ):
    """Bug class: premature ack (a group that has read nothing does not count).

    The ack floor is the lowest position among the groups that have read something, so
    a group at -1 (new, or reset by a seek) holds no page: once the other groups read
    past a page it is acked, and retention deletes messages the unread group never got.
    """

    def ack_floor(self, topic: str, positions: Mapping[str, int]) -> int:
        return min((position for position in positions.values() if position != -1), default=-1)


class SeekLandsOnOldest(RocksMQ):
    """Bug class: wrong reset (a seek to a retained-away id is clamped, not reset).

    ``seek(t, g, id)`` with an id that retention has deleted puts the position on the
    oldest retained message, where SPEC says -1; the next poll returns the same messages,
    but the position differs and no longer follows later retention from the earliest.
    """

    def seek(self, topic: str, group: str, msg_id: int) -> None:
        cached = self._topics.get(topic)
        if (
            cached is not None
            and isinstance(msg_id, int)
            and 0 < msg_id <= cached.trim_id < cached.last_id
        ):
            msg_id = cached.trim_id + 1
        super().seek(topic, group, msg_id)


class ProduceInTwoTransactions(RocksMQ):
    """Bug class: torn batch (one produce committed as two transactions).

    A produce of two or more messages commits the first half (messages, page accounting,
    high-water mark) as one transaction, then the second half as another. Each half is
    consistent, so only a crash between them (fault points of the first half's
    ``produce.after_write`` and the second's ``produce.before_write``) shows it: half the
    messages survive, a state neither before nor after the produce.
    """

    def produce(self, topic: str, messages: Sequence[ProducerMessage]) -> list[int]:
        self._check_serving()
        validate_name("topic", topic)
        batch = validate_messages(messages)
        if len(batch) < 2:
            return super().produce(topic, batch)
        half = len(batch) // 2
        return super().produce(topic, batch[:half]) + super().produce(topic, batch[half:])


unread_group_holds_nothing = factory_of(UnreadGroupHoldsNothing)
seek_lands_on_oldest = factory_of(SeekLandsOnOldest)
produce_in_two_transactions = factory_of(ProduceInTwoTransactions)

_MODULE = __name__
MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "unread-group-holds-nothing",
        "retention",
        "a group at -1 (read nothing) does not hold pages back from acks and retention",
        f"{_MODULE}:unread_group_holds_nothing",
    ),
    Mutant(
        "seek-lands-on-oldest",
        "ordering",
        "a seek to a retained-away id lands on the oldest retained message, not -1",
        f"{_MODULE}:seek_lands_on_oldest",
    ),
    Mutant(
        "produce-in-two-transactions",
        "crash-consistency",
        "a produce of several messages commits its two halves in two transactions",
        f"{_MODULE}:produce_in_two_transactions",
    ),
)
