"""Classic queue bugs, not Milvus-specific, seeded into ``impl.RocksMQ``: off-by-ones at page
boundaries, retention walking too far, and ordering mistakes between what is computed and
what is written. Load with ``--impl conformance.mutants.classic:<factory>``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from rmqsim.conformance.mutants import Mutant
from rmqsim.conformance.mutants.base import factory_of
from rmqsim.impl import RocksMQ
from rmqsim.impl.rocksmq import CachedTopic, LazyNow
from rmqsim.impl.storage import Plan
from rmqsim.model.api import ConsumerMessage

__all__ = [
    "MUTANTS",
    "EndBeforeMessages",
    "PageBoundarySkip",
    "RetentionPastAcked",
    "StaleAcks",
    "end_before_messages",
    "page_boundary_skip",
    "retention_past_acked",
    "stale_acks",
]


class PageBoundarySkip(RocksMQ):
    """Bug class: skipped delivery. A poll that crosses a closed page's end starts the next
    page one message too far (``end_id + 2``): that message is never delivered, yet the
    position moves past it."""

    def consume(self, topic: str, group: str, n: int) -> list[ConsumerMessage]:
        found = super().consume(topic, group, n)
        cached = self._topics.get(topic)
        if not found or cached is None:
            return found
        ends = {page.end_id for page in cached.pages}
        first = found[0].msg_id
        return [m for m in found if not (m.msg_id - 1 in ends and m.msg_id - 1 >= first)]


class RetentionPastAcked(RocksMQ):
    """Bug class: premature deletion. When a retention pass deletes every acked page, its
    loop runs one page further and deletes the first unacked page too (messages a lagging
    group has not read)."""

    def retention_count(self, cached: CachedTopic, now: LazyNow) -> int:
        count = super().retention_count(cached, now)
        if count and count == cached.acked_count < len(cached.pages):
            return count + 1
        return count


class StaleAcks(RocksMQ):
    """Bug class: read-before-write ordering. Acks are evaluated against the positions as
    stored before the move is written, so the pages a move makes acked are acked one
    operation late (or never, if no later move comes)."""

    def ack_floor(self, topic: str, positions: Mapping[str, int]) -> int:
        return super().ack_floor(topic, self.group_positions(topic))


class EndBeforeMessages(RocksMQ):
    """Bug class: publish before write. ``produce`` first writes the topic's new end (id
    high-water mark, open page, closed pages), then the messages in a second write: a crash
    between them leaves ids issued whose messages are not there to read."""

    def write_plan(self, operation: str, plan: Plan) -> None:
        if operation != "produce" or not plan.msg_puts:
            super().write_plan(operation, plan)
            return
        super().write_plan(operation, replace(plan, msg_puts=[]))
        super().write_plan(operation, Plan(msg_puts=plan.msg_puts))


page_boundary_skip = factory_of(PageBoundarySkip)
retention_past_acked = factory_of(RetentionPastAcked)
stale_acks = factory_of(StaleAcks)
end_before_messages = factory_of(EndBeforeMessages)

_MODULE = __name__
MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "page-boundary-skip",
        "ordering",
        "a poll crossing a page end skips the message right after it",
        f"{_MODULE}:page_boundary_skip",
    ),
    Mutant(
        "retention-past-acked",
        "retention",
        "retention deletes the first unacked page after the acked ones",
        f"{_MODULE}:retention_past_acked",
    ),
    Mutant(
        "stale-acks",
        "ordering",
        "acks evaluated against the positions before the move is written",
        f"{_MODULE}:stale_acks",
    ),
    Mutant(
        "end-before-messages",
        "crash-consistency",
        "produce writes the topic's end before its messages (two writes)",
        f"{_MODULE}:end_before_messages",
    ),
)
