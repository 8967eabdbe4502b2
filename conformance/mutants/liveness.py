"""Liveness bugs seeded into ``impl.RocksMQ``: an operation that never returns. The lockstep
cannot compare an outcome that never comes; the liveness bound (``conformance.running.watchdog``,
``--op-timeout-s``) turns it into the anomaly ``hang``, in process and in
``--crash-mode process`` alike. Load with ``--impl conformance.mutants.liveness:<factory>``.
"""

from __future__ import annotations

from rmqsim.conformance.mutants import Mutant
from rmqsim.conformance.mutants.base import factory_of
from rmqsim.impl import RocksMQ
from rmqsim.impl.rocksmq import CachedTopic, LazyNow
from rmqsim.impl.storage import Plan
from rmqsim.model.api import Page

__all__ = [
    "MUTANTS",
    "LastGroupDeadlock",
    "last_group_deadlock",
]


class LastGroupDeadlock(RocksMQ):
    """Bug class: deadlock (a lock taken twice). When the last group of a topic is
    destroyed while some closed page is still unacked, the queue asks its own public
    ``get_latest_msg`` how far the pages it releases go. That takes the topic's lock, which
    ``destroy_consumer_group`` already holds, and a ``threading.Lock`` is not reentrant: the
    call waits for itself forever. Rare: it needs the last group of a topic to go while a
    page it held back is closed and unread."""

    def plan_acks(
        self, cached: CachedTopic, groups: dict[str, int], plan: Plan, now: LazyNow
    ) -> list[Page]:
        if not groups and cached.acked_count < len(cached.pages):
            self.get_latest_msg(cached.name)
        return super().plan_acks(cached, groups, plan, now)


last_group_deadlock = factory_of(LastGroupDeadlock)

_MODULE = __name__
MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "last-group-deadlock",
        "liveness",
        "destroying a topic's last group with an unacked page takes the topic lock twice",
        f"{_MODULE}:last_group_deadlock",
    ),
)
