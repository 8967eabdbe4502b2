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

from dataclasses import dataclass, field

from model.api import Completion, Delivery, retry_topic

__all__ = ["CONSUMER_ANOMALIES", "ConsumerViolation", "GroupHistory"]

CONSUMER_ANOMALIES: dict[str, str] = {
    "consumer-lost": "after the drain, a produced message was neither acknowledged nor "
    "dead-lettered",
    "consumer-duplicate": "a finished message was delivered again without a crash to explain "
    "it, below the persisted offset, or twice at once",
    "offset-passes-unacked": "a committed offset (in memory or stored) passed a message that "
    "was not finished",
    "offset-regression": "a committed offset went back (in memory, within one consumer's "
    "life, or in the store), or a stored one disappeared",
    "order-violation": "an orderly consumer delivered a message before a lower one finished",
    "retry-mismatch": "a delivery's reconsume times or origin differ from its history",
    "dlq-mismatch": "a message was dead-lettered before using up its deliveries, or retried "
    "after using them up",
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
    finished: dict[int, int] = field(default_factory=dict)  # id -> incarnation it finished in
    low: int = 1  # lowest id not finished
    stored: int | None = None  # last stored offset seen
    committed: int = -1  # last memory offset reported since the consumer (re)started
    outstanding: set[int] = field(default_factory=set)  # delivered, not completed
    retries: dict[int, int] = field(default_factory=dict)  # local retries this incarnation
    sent: dict[int, tuple[str, int, int]] = field(default_factory=dict)  # id -> origin, k

    def finish(self, msg_id: int, incarnation: int) -> None:
        self.finished[msg_id] = incarnation
        while self.low in self.finished:
            self.low += 1

    def check_offset(self, offset: int, where: str) -> None:
        if offset > self.low and self.low <= self.last_id:
            raise ConsumerViolation(
                "offset-passes-unacked",
                f"{where} offset of {self.name} is {offset} but message {self.low} is not finished",
            )


class GroupHistory:
    """The reported history of one consumer group on ``topic``."""

    def __init__(self, group: str, topic: str, *, max_reconsume_times: int, orderly: bool) -> None:
        self.group = group
        self.topic = topic
        self.max_reconsume_times = max_reconsume_times
        self.orderly = orderly
        self.queues = {name: _QueueHistory(name) for name in (topic, retry_topic(group))}
        self.incarnation = 0
        #: Per delivered (queue, id): its reconsume times and origin id when delivered.
        self.delivered_k: dict[tuple[str, int], int] = {}
        self.origin_of: dict[tuple[str, int], int] = {}
        #: Origin ids (of the topic) acknowledged or dead-lettered.
        self.origins_done: set[int] = set()

    # ------------------------------------------------------------------ reports

    def produced(self, ids: list[int] | tuple[int, ...]) -> None:
        """Ids the producers' ``produce`` returned for the subscribed topic."""
        if ids:
            queue = self.queues[self.topic]
            queue.last_id = max(queue.last_id, *ids)

    def started(self, offsets: dict[str, int]) -> None:
        """A (re)started consumer read ``offsets`` from its store."""
        self.incarnation += 1
        for name, queue in self.queues.items():
            queue.outstanding.clear()
            queue.retries.clear()
            queue.committed = -1
            offset = offsets.get(name, -1)
            if queue.stored is not None and offset < queue.stored:
                raise ConsumerViolation(
                    "offset-regression",
                    f"restart read {offset} for {name}, but {queue.stored} was persisted",
                )

    def delivered(self, delivery: Delivery) -> None:
        queue = self.queues[delivery.queue]
        ids = [m.msg_id for m in delivery.messages]
        in_order = ids == list(range(ids[0], ids[0] + len(ids))) and queue.low >= ids[0]
        if self.orderly and delivery.queue == self.topic and not in_order:
            raise ConsumerViolation(
                "order-violation",
                f"batch {ids} delivered while message {queue.low} is not finished",
            )
        for message in delivery.messages:
            msg_id = message.msg_id
            if msg_id in queue.outstanding:
                raise ConsumerViolation(
                    "consumer-duplicate", f"{queue.name} {msg_id} delivered twice at once"
                )
            done_in = queue.finished.get(msg_id)
            stored = queue.stored if queue.stored is not None else -1
            if done_in is not None and (done_in == self.incarnation or msg_id < stored):
                why = "without a crash" if done_in == self.incarnation else f"below {stored}"
                raise ConsumerViolation(
                    "consumer-duplicate",
                    f"{queue.name} {msg_id} was finished and is delivered again {why}",
                )
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

    def completed(self, done: Completion) -> None:
        queue = self.queues[done.queue]
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
