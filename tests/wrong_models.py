"""Small, deliberately wrong queues, one per anomaly the runner names.

Each is the reference model with one bug, served through
``conformance.adapter.make_model_factory``. They prove that the lockstep runner fails on a
wrong implementation and names the anomaly right. (The catalogue of mutants of the real
implementation is a separate thing; these test the harness itself.)
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rmqsim.model import ReferenceMQ
from rmqsim.model.api import ConsumerMessage, TopicNotFoundError


class LostWrite(ReferenceMQ):
    """Stores every message of a batch but the last, yet returns all the ids."""

    def produce(self, topic: str, messages: Any) -> list[int]:
        if isinstance(messages, list) and len(messages) >= 2 and topic in self._topics:
            ids = super().produce(topic, messages[:-1])
            return [*ids, ids[-1] + 1]
        return super().produce(topic, messages)


class DuplicateDelivery(ReferenceMQ):
    """Delivers the last message of a poll twice."""

    def consume(self, topic: str, group: str, n: int) -> list[ConsumerMessage]:
        found = super().consume(topic, group, n)
        return [*found, found[-1]] if len(found) >= 2 else found


class SkippingPoll(ReferenceMQ):
    """Drops the second message of a poll of three or more."""

    def consume(self, topic: str, group: str, n: int) -> list[ConsumerMessage]:
        found = super().consume(topic, group, n)
        return [found[0], *found[2:]] if len(found) >= 3 else found


class ReversedPoll(ReferenceMQ):
    """Returns a poll's messages newest first."""

    def consume(self, topic: str, group: str, n: int) -> list[ConsumerMessage]:
        return list(reversed(super().consume(topic, group, n)))


class RetentionKeepsMessages(ReferenceMQ):
    """Retention deletes pages but leaves their messages in place."""

    def _delete_through(self, state: Any, page_count: int, page_bytes: int) -> None:
        kept_messages, kept_first = state.messages.copy(), state.first_id
        super()._delete_through(state, page_count, page_bytes)
        state.messages, state.first_id = kept_messages, kept_first


class ForgetsHighWaterMark(ReferenceMQ):
    """Destroying a topic forgets its ids, so a re-created topic starts again at 1."""

    def destroy_topic(self, topic: str) -> None:
        super().destroy_topic(topic)
        self._last_ids.pop(topic, None)


class GreedyRetention(ReferenceMQ):
    """The size pass keeps only half of what the limit allows."""

    def run_retention(self) -> None:
        config = self.config
        if config.retention_size_bytes > 0:
            self.config = replace(config, retention_size_bytes=config.retention_size_bytes // 2)
        try:
            super().run_retention()
        finally:
            self.config = config


class FlippedPayload(ReferenceMQ):
    """Corrupts the payload of every 5th message on delivery."""

    def consume(self, topic: str, group: str, n: int) -> list[ConsumerMessage]:
        return [
            replace(m, payload=m.payload + b"!") if m.msg_id % 5 == 0 else m
            for m in super().consume(topic, group, n)
        ]


class NoBackwardSeek(ReferenceMQ):
    """Ignores a seek that would move a group backward (Milvus panics instead)."""

    def seek(self, topic: str, group: str, msg_id: int) -> None:
        state = self._topics.get(topic) if isinstance(topic, str) else None
        position = state.groups.get(group) if state is not None else None
        if isinstance(position, int) and isinstance(msg_id, int) and 0 <= msg_id < position:
            return
        super().seek(topic, group, msg_id)


class AckOffByOne(ReferenceMQ):
    """Acks a page when position >= end_id (Milvus), one message too early."""

    def _update_acks(self, state: Any) -> None:
        if not state.groups:
            return
        min_position = min(state.groups.values())
        while state.acked_pages < len(state.pages):
            page = state.pages[state.acked_pages]
            if not min_position >= page.end_id:
                break
            state.pages[state.acked_pages] = replace(page, acked_ts=self._now())
            state.acked_pages += 1
            state.acked_bytes += page.size_bytes
            state.cached = None


class OpenPageOffByOne(ReferenceMQ):
    """Reports the open page one byte larger than it is."""

    def snapshot(self, topics: Any = None, messages_from: Any = None) -> Any:
        state = super().snapshot(topics, messages_from)
        fixed = {
            name: replace(t, open_page_bytes=t.open_page_bytes + 1) if t.open_page_bytes else t
            for name, t in state.topics.items()
        }
        return type(state).build(fixed, dict(state.groups))


class GroupWithoutTopic(ReferenceMQ):
    """Creates a group on a missing topic without complaint (Milvus)."""

    def create_consumer_group(self, topic: str, group: str) -> None:
        try:
            super().create_consumer_group(topic, group)
        except TopicNotFoundError:
            return


class TwoStepProduce(ReferenceMQ):
    """Writes a batch in two steps with a crash point between them (Milvus)."""

    faults: Any

    def produce(self, topic: str, messages: Any) -> list[int]:
        if isinstance(messages, list) and len(messages) >= 2 and topic in self._topics:
            first = super().produce(topic, messages[:1])
            self.faults("produce.between_steps")
            return first + super().produce(topic, messages[1:])
        return super().produce(topic, messages)


#: wrong model -> the anomaly the runner must name, and profiles likely to expose it.
EXPECTED: dict[type[ReferenceMQ], tuple[str, tuple[str, ...]]] = {
    LostWrite: ("lost-write", ("smoke",)),
    DuplicateDelivery: ("duplicate", ("smoke",)),
    SkippingPoll: ("poll-skip", ("smoke",)),
    ReversedPoll: ("nonmonotonic-poll", ("smoke",)),
    RetentionKeepsMessages: ("resurrected-message", ("retention",)),
    ForgetsHighWaterMark: ("id-reuse", ("churn", "smoke")),
    GreedyRetention: ("premature-retention", ("retention",)),
    FlippedPayload: ("payload-mismatch", ("smoke",)),
    NoBackwardSeek: ("position-mismatch", ("seek-storm",)),
    AckOffByOne: ("ack-mismatch", ("retention",)),
    OpenPageOffByOne: ("page-mismatch", ("smoke",)),
    GroupWithoutTopic: ("error-mismatch", ("churn", "smoke")),
    TwoStepProduce: ("torn-operation", ("crashy",)),
}
