"""Consumer-layer mutants: the push consumer bugs docs/CONSUMER.md marks, each a small
subclass of ``impl.consumer``'s parts behind a consumer factory, for ``--impl`` on the
consumer profiles (``rmqsim run --profile consumer-crashy --seeds 0:20 --impl ...``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from rmqsim.conformance.mutants import Mutant
from rmqsim.impl.consumer import Cached, ConsumerCore, ProcessQueue, RocksOffsetStore
from rmqsim.model.api import ConsumerConfig, MessageQueue

__all__ = [
    "MUTANTS",
    "commit_highest_acked",
    "core_factory",
    "failed_send_back_advances",
    "orderly_commit_empty_returns_one",
    "persist_drops_other_queues",
]


class _HighestAckedQueue(ProcessQueue):
    """Commits past the highest id acknowledged so far, not the lowest still pending."""

    __slots__ = ("_highest",)

    def __init__(self) -> None:
        super().__init__()
        self._highest = -1

    def remove(self, ids: list[int]) -> int:
        offset = super().remove(ids)
        if offset < 0 or not ids:
            return offset
        self._highest = max(self._highest, *ids)
        return max(offset, self._highest + 1)


class _CommitOneQueue(ProcessQueue):
    """The Go client's ``commit``: an empty consuming map yields 0 + 1."""

    __slots__ = ()

    def commit(self) -> int:
        return super().commit() if self.consuming else 1


class _DroppingOffsetStore(RocksOffsetStore):
    """The Go client's ``persist(mqs)``: deletes every queue not listed from the table, and
    the whole-table store then loses those offsets too."""

    def persist(self, queues: Iterable[str]) -> None:
        listed = list(queues)
        dropped = [q for q in self.table if q not in listed]
        for queue in dropped:
            del self.table[queue]
        super().persist(listed)
        db = self._live()
        for queue in dropped:
            db.delete(self._key(queue))


class _HighestAckedCore(ConsumerCore):
    """Bug class: consumer offsets. The committed offset is the highest acknowledged id + 1
    rather than the lowest id still pending, so it passes messages other workers hold."""

    process_queue_cls = _HighestAckedQueue


class _CommitOneCore(ConsumerCore):
    """Bug class: orderly commit. Committing an empty consuming map returns 1 (the Go
    client's 0 + 1) instead of "nothing to commit", moving the offset back to 1."""

    process_queue_cls = _CommitOneQueue


class _DroppingCore(ConsumerCore):
    """Bug class: offset persistence. Persisting some queues deletes the offsets of every
    queue not listed (as the Go client's ``persist`` does)."""

    offset_store_cls = _DroppingOffsetStore


class _FailedSendAdvancesCore(ConsumerCore):
    """Bug class: retry bookkeeping. A message whose send-back failed is removed from the
    process queue anyway (it is still retried locally), so the offset passes it: a crash
    then loses it."""

    def removable(self, done: list[int], failed: list[Cached]) -> list[int]:
        return done + [c.message.msg_id for c in failed]


def core_factory(
    core: type[ConsumerCore], tweak: Callable[[ConsumerConfig], ConsumerConfig] | None = None
) -> Any:
    """A consumer factory (``--impl``) building ``core``; ``tweak(config)`` may change
    the configuration the core is given (the profile's stays what the checks expect)."""

    def factory(
        *,
        queue: MessageQueue,
        group: str,
        topic: str,
        config: ConsumerConfig,
        clock: Any,
        path: Path,
        send_hook: Any,
    ) -> ConsumerCore:
        return core.open(
            queue=queue,
            group=group,
            topic=topic,
            config=config if tweak is None else tweak(config),
            clock=clock,
            path=path,
            send_hook=send_hook,
        )

    factory.__doc__ = core.__doc__
    return factory


commit_highest_acked = core_factory(_HighestAckedCore)
persist_drops_other_queues = core_factory(_DroppingCore)
orderly_commit_empty_returns_one = core_factory(_CommitOneCore)
failed_send_back_advances = core_factory(_FailedSendAdvancesCore)

_MODULE = __name__

MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        name="commit-highest-acked",
        bug_class="consumer-offsets",
        summary="the committed offset is the highest acknowledged id + 1, not the lowest "
        "pending id, so it passes messages other workers still hold",
        impl=f"{_MODULE}:commit_highest_acked",
        layer="consumer",
    ),
    Mutant(
        name="persist-drops-other-queues",
        bug_class="consumer-offsets",
        summary="persist(queues) deletes every queue not listed from the offset table and "
        "the store (rocketmq-client-go's remoteBrokerOffsetStore.persist)",
        impl=f"{_MODULE}:persist_drops_other_queues",
        layer="consumer",
    ),
    Mutant(
        name="orderly-commit-empty-returns-one",
        bug_class="consumer-offsets",
        summary="an orderly commit of an empty consuming map returns 1 (rocketmq-client-go's "
        "processQueue.commit), forcing the offset back to 1",
        impl=f"{_MODULE}:orderly_commit_empty_returns_one",
        layer="consumer",
    ),
    Mutant(
        name="failed-send-back-advances",
        bug_class="consumer-redelivery",
        summary="a message whose send-back to the retry topic failed is removed from the "
        "process queue anyway, so the offset passes it (rocketmq-client-go's "
        "consumeMessageCurrently)",
        impl=f"{_MODULE}:failed_send_back_advances",
        layer="consumer",
    ),
)
