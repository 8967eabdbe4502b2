"""History checks of push consumers: what docs/CONSUMER.md guarantees, checked from what
one consumer reported, step by step, without the model.

Feed a ``GroupHistory`` every start, delivery, completion and persist of one group (and
every id produced to its topic); it raises ``ConsumerViolation`` naming the anomaly at the
first report that breaks a guarantee, and ``finish()`` checks that nothing was lost once the
run drained. The lockstep runner uses it on the consumer under test before comparing with the
model, so a seeded bug is reported by what it breaks rather than as a bare mismatch; a test
feeds it the threaded consumer's reports the same way.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from rmqsim.model.api import Completion, ConsumeResult, Delivered, Delivery, retry_topic

__all__ = ["CONSUMER_ANOMALIES", "ConsumerViolation", "GroupHistory"]

CONSUMER_ANOMALIES: dict[str, str] = {
    "consumer-lost": "a pull skipped a message not finished, or after the drain a produced "
    "message was neither acknowledged nor dead-lettered",
    "consumer-duplicate": "a finished message was pulled or delivered again without a crash "
    "to explain it, below the persisted offset (outside the un-persisted window), or twice at "
    "once",
    "offset-passes-unacked": "a committed offset (in memory or stored) passed a message that "
    "was not finished",
    "offset-regression": "a committed offset went back (in memory, within one consumer's "
    "life, or in the store), or a stored one disappeared",
    "order-violation": "an orderly consumer delivered a message before a lower one finished",
    "retry-mismatch": "a delivery's reconsume times or origin differ from its history",
    "dlq-mismatch": "a message was dead-lettered before using up its deliveries, or retried "
    "after using them up",
    "completion-mismatch": "a completion did not account for its batch: each delivered "
    "message exactly once, as the handler's result and the refused send-backs say",
    "flow-control": "a pull went ahead while its process queue held more than the cached "
    "count or bytes allow, or was skipped while it held no more",
    "consumer-mismatch": "the consumer under test and the model returned different values",
}


class ConsumerViolation(Exception):
    """A guarantee broken: ``anomaly`` is a key of ``CONSUMER_ANOMALIES``."""

    def __init__(self, anomaly: str, detail: str) -> None:
        assert anomaly in CONSUMER_ANOMALIES, anomaly
        super().__init__(f"{anomaly}: {detail}")
        self.anomaly = anomaly
        self.detail = detail


@dataclass(slots=True)
class _QueueHistory:
    """One queue (topic or retry topic) as one group has consumed it."""

    name: str
    last_id: int = 0  # every id in 1..last_id exists
    sizes: dict[int, int] = field(default_factory=dict)  # id -> payload bytes
    finished: dict[int, int] = field(default_factory=dict)  # id -> incarnation it finished in
    low: int = 1  # lowest id not finished
    stored: int | None = None  # last stored offset seen
    committed: int = -1  # last memory offset reported since the consumer (re)started
    # This incarnation: the next id a pull may add, what the pulls added and is not
    # finished (id -> bytes: the process queue), what is delivered and not completed,
    # and the local retries of each id.
    next_pull: int = 1
    cached: dict[int, int] = field(default_factory=dict)
    outstanding: set[int] = field(default_factory=set)
    retries: dict[int, int] = field(default_factory=dict)
    sent: dict[int, tuple[str, int, int]] = field(default_factory=dict)  # id -> origin, k

    def restart(self, offset: int) -> None:
        self.next_pull = max(offset, 1)
        self.cached.clear()
        self.outstanding.clear()
        self.retries.clear()
        self.committed = -1

    def finish(self, msg_id: int, incarnation: int) -> None:
        self.finished[msg_id] = incarnation
        self.cached.pop(msg_id, None)
        while self.low in self.finished:
            self.low += 1

    def check_offset(self, offset: int, where: str) -> None:
        if offset > self.low and self.low <= self.last_id:
            raise ConsumerViolation(
                "offset-passes-unacked",
                f"{where} offset of {self.name} is {offset} but message {self.low} is not finished",
            )

    def check_again(self, msg_id: int, incarnation: int, what: str) -> None:
        """A finished message may come again only after a crash (a later incarnation) and
        only at or above the stored offset: the window the crash did not persist."""
        done_in = self.finished.get(msg_id)
        if done_in is None:
            return
        stored = -1 if self.stored is None else self.stored
        if done_in == incarnation:
            why = "without a crash in between"
        elif msg_id < stored:
            why = f"below the persisted offset {stored}"
        else:
            return
        raise ConsumerViolation(
            "consumer-duplicate", f"{self.name} {msg_id} was finished and is {what} again {why}"
        )


class GroupHistory:
    """The reported history of one consumer group on ``topic``.

    ``max_cached_count``/``max_cached_bytes`` (the consumer's flow-control limits) turn on
    the flow-control check of ``pulled``; without them pulls are checked for skips and
    repeats only.
    """

    def __init__(
        self,
        group: str,
        topic: str,
        *,
        max_reconsume_times: int,
        orderly: bool,
        max_cached_count: int | None = None,
        max_cached_bytes: int | None = None,
    ) -> None:
        self.group = group
        self.topic = topic
        self.max_reconsume_times = max_reconsume_times
        self.orderly = orderly
        self.limits = (
            None
            if max_cached_count is None or max_cached_bytes is None
            else (max_cached_count, max_cached_bytes)
        )
        self.queues = {name: _QueueHistory(name) for name in (topic, retry_topic(group))}
        self.incarnation = 0
        #: Per delivered (queue, id): its reconsume times, origin id and payload size.
        self.delivered_k: dict[tuple[str, int], int] = {}
        self.origin_of: dict[tuple[str, int], int] = {}
        #: Batches delivered and not completed (this incarnation): seq -> queue, messages.
        self.batches: dict[int, tuple[str, tuple[Delivered, ...]]] = {}
        #: Origin ids (of the topic) acknowledged or dead-lettered.
        self.origins_done: set[int] = set()

    # ------------------------------------------------------------------ reports

    def produced(self, ids: Sequence[int], sizes: Sequence[int] | None = None) -> None:
        """Ids the producers' ``produce`` returned for the subscribed topic, with their
        payload sizes in bytes (needed for the byte limit of flow control)."""
        queue = self.queues[self.topic]
        if sizes is not None:
            assert len(sizes) == len(ids), (ids, sizes)
            queue.sizes.update(zip(ids, sizes, strict=True))
        if ids:
            queue.last_id = max(queue.last_id, *ids)

    def started(self, offsets: dict[str, int]) -> None:
        """A (re)started consumer read ``offsets`` from its store."""
        self.incarnation += 1
        self.batches.clear()
        for name, queue in self.queues.items():
            offset = offsets.get(name, -1)
            if queue.stored is not None and offset < queue.stored:
                raise ConsumerViolation(
                    "offset-regression",
                    f"restart read {offset} for {name}, but {queue.stored} was persisted",
                )
            queue.check_offset(offset, "the restarted")
            queue.restart(offset)

    def pulled(self, added: dict[str, tuple[int, ...] | None]) -> None:
        """One pull: per queue the ids added to the process queue, or None when flow
        control skipped it. Pulls add every id from the restart offset on, in order, each
        once per incarnation (the ones that were finished only within the un-persisted
        window), and go ahead exactly while the process queue is within its limits."""
        for name, ids in added.items():
            queue = self.queues[name]
            if self.limits is not None:
                count, size = len(queue.cached), sum(queue.cached.values())
                over = count > self.limits[0] or size > self.limits[1]
                if over == (ids is not None):
                    did = "pulled" if over else "skipped a pull"
                    raise ConsumerViolation(
                        "flow-control",
                        f"{name}: {did} with {count} messages / {size} bytes cached "
                        f"(limits {self.limits[0]} / {self.limits[1]})",
                    )
            for msg_id in ids or ():
                if msg_id < queue.next_pull:
                    raise ConsumerViolation(
                        "consumer-duplicate",
                        f"{name} {msg_id} pulled again in one life of the consumer",
                    )
                skipped = [i for i in range(queue.next_pull, msg_id) if i not in queue.finished]
                if skipped:
                    raise ConsumerViolation(
                        "consumer-lost",
                        f"a pull of {name} went on at {msg_id}, skipping {skipped[:10]} "
                        "which were never finished",
                    )
                queue.check_again(msg_id, self.incarnation, "pulled")
                queue.next_pull = msg_id + 1
                queue.cached[msg_id] = queue.sizes.get(msg_id, 0)

    def delivered(self, delivery: Delivery) -> None:
        queue = self.queues[delivery.queue]
        ids = [m.msg_id for m in delivery.messages]
        in_order = ids == list(range(ids[0], ids[0] + len(ids))) and queue.low >= ids[0]
        if self.orderly and delivery.queue == self.topic and not in_order:
            raise ConsumerViolation(
                "order-violation",
                f"batch {ids} delivered while message {queue.low} is not finished",
            )
        if delivery.seq in self.batches:
            raise ConsumerViolation("completion-mismatch", f"batch {delivery.seq} handed out twice")
        for message in delivery.messages:
            msg_id = message.msg_id
            if msg_id in queue.outstanding:
                raise ConsumerViolation(
                    "consumer-duplicate", f"{queue.name} {msg_id} delivered twice at once"
                )
            queue.check_again(msg_id, self.incarnation, "delivered")
            origin, k_sent = (self.topic, msg_id, 0), 0
            if delivery.queue != self.topic:
                sent = queue.sent.get(msg_id)
                if sent is None:
                    raise ConsumerViolation(
                        "retry-mismatch", f"{queue.name} {msg_id} was never sent back"
                    )
                origin, k_sent = sent, sent[2]
            expected = k_sent + queue.retries.get(msg_id, 0)
            got = (message.origin_topic, message.origin_id, message.reconsume_times)
            if got != (origin[0], origin[1], expected):
                raise ConsumerViolation(
                    "retry-mismatch",
                    f"{queue.name} {msg_id}: delivered as (origin, reconsume) {got}, history "
                    f"says {(origin[0], origin[1], expected)}",
                )
            queue.outstanding.add(msg_id)
            self.delivered_k[(delivery.queue, msg_id)] = message.reconsume_times
            self.origin_of[(delivery.queue, msg_id)] = message.origin_id
        self.batches[delivery.seq] = (delivery.queue, delivery.messages)

    def completed(
        self,
        done: Completion,
        result: ConsumeResult | None = None,
        refused: Collection[int] = (),
    ) -> None:
        """A batch completed with the handler's ``result`` (when known) while the queue
        refused the send-backs of the ids in ``refused``."""
        queue = self.queues[done.queue]
        self._check_accounts(done, result, refused)
        limit = self.max_reconsume_times
        for msg_id in done.acked:
            self._finish(queue, msg_id, origin_done=True)
        for pairs, dead in ((done.retried, False), (done.dead, True)):
            for old, new in pairs:
                k = self.delivered_k[(done.queue, old)]
                if (k >= limit) != dead:
                    where = "dead-lettered" if dead else "sent to the retry topic"
                    raise ConsumerViolation(
                        "dlq-mismatch", f"{queue.name} {old} {where} at reconsume {k} (max {limit})"
                    )
                if not dead:
                    origin = self.origin_of[(done.queue, old)]
                    retry = self.queues[retry_topic(self.group)]
                    retry.sent[new] = (self.topic, origin, k + 1)
                    retry.sizes[new] = queue.sizes.get(old, 0)
                    retry.last_id = max(retry.last_id, new)
                self._finish(queue, old, origin_done=dead)
        for msg_id in done.kept:
            queue.outstanding.discard(msg_id)
            queue.retries[msg_id] = queue.retries.get(msg_id, 0) + 1
        if done.offset >= 0:
            queue.check_offset(done.offset, "the committed")
            if done.offset < queue.committed:
                raise ConsumerViolation(
                    "offset-regression",
                    f"the committed offset of {queue.name} went back from {queue.committed} "
                    f"to {done.offset}",
                )
            queue.committed = done.offset

    def _check_accounts(
        self, done: Completion, result: ConsumeResult | None, refused: Collection[int]
    ) -> None:
        """Every message of the batch is acknowledged, sent back or kept, exactly once,
        as the result says: SUCCESS acknowledges all; RETRY_LATER sends each back unless
        the queue refused it (then keeps it); SUSPEND dead-letters the leading messages
        that used up their deliveries and keeps the rest, from the first that may still
        be retried (or whose send was refused)."""
        batch = self.batches.get(done.seq)
        if batch is None or batch[0] != done.queue:
            raise ConsumerViolation(
                "completion-mismatch", f"batch {done.seq} of {done.queue} was not delivered"
            )
        messages = batch[1]
        sent = [old for old, _ in (*done.retried, *done.dead)]
        accounted = sorted([*done.acked, *sent, *done.kept])
        if accounted != sorted(m.msg_id for m in messages):
            raise ConsumerViolation(
                "completion-mismatch",
                f"batch {done.seq} delivered {[m.msg_id for m in messages]} but the completion "
                f"accounts for {accounted}",
            )
        if result is not None:
            self._check_result(done, result, refused, messages)
        del self.batches[done.seq]

    def _check_result(
        self,
        done: Completion,
        result: ConsumeResult,
        refused: Collection[int],
        messages: tuple[Delivered, ...],
    ) -> None:
        ids = [m.msg_id for m in messages]
        if result is ConsumeResult.SUCCESS:
            wrong = list(done.acked) != ids
        elif result is ConsumeResult.RETRY_LATER:
            wrong = bool(done.acked) or any((i in refused) != (i in done.kept) for i in ids)
        else:
            dead = [old for old, _ in done.dead]
            wrong = bool(done.acked or done.retried) or dead + list(done.kept) != ids
            wrong = wrong or any(i in refused for i in dead)
            first = messages[len(dead)] if len(dead) < len(messages) else None
            used_up = (
                not wrong
                and first is not None
                and first.msg_id not in refused
                and first.reconsume_times >= self.max_reconsume_times
            )
            if used_up:
                assert first is not None
                raise ConsumerViolation(
                    "dlq-mismatch",
                    f"{done.queue} {first.msg_id} was put back at reconsume "
                    f"{first.reconsume_times} (max {self.max_reconsume_times})",
                )
        if wrong:
            raise ConsumerViolation(
                "completion-mismatch",
                f"batch {done.seq} {ids} completed with {result.value} and refused sends "
                f"{sorted(set(refused) & set(ids))}: acked {done.acked}, retried "
                f"{done.retried}, dead {done.dead}, kept {done.kept}",
            )

    def _finish(self, queue: _QueueHistory, msg_id: int, *, origin_done: bool) -> None:
        """The message is finished; its origin too when acknowledged or dead-lettered."""
        queue.outstanding.discard(msg_id)
        queue.retries.pop(msg_id, None)
        queue.finish(msg_id, self.incarnation)
        if origin_done:
            self.origins_done.add(self.origin_of[(queue.name, msg_id)])

    def persisted(self, stored: dict[str, int]) -> None:
        for name, queue in self.queues.items():
            offset = stored.get(name)
            if offset is None:
                if queue.stored is not None:
                    raise ConsumerViolation(
                        "offset-regression", f"the stored offset of {name} disappeared"
                    )
                continue
            if queue.stored is not None and offset < queue.stored:
                raise ConsumerViolation(
                    "offset-regression",
                    f"the stored offset of {name} went back from {queue.stored} to {offset}",
                )
            queue.check_offset(offset, "the stored")
            queue.stored = offset

    def finish(self) -> None:
        """After the drain: every produced message was acknowledged or dead-lettered."""
        last = self.queues[self.topic].last_id
        missing = [i for i in range(1, last + 1) if i not in self.origins_done]
        if missing:
            shown = ", ".join(map(str, missing[:10]))
            raise ConsumerViolation(
                "consumer-lost",
                f"group {self.group}: {len(missing)} of {last} messages never finished ({shown})",
            )
