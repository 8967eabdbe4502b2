"""``ReferenceMQ``: SPEC.md as executable Python, the oracle every implementation is held to.

Clarity comes first, but with data structures that keep every operation proportional to
its own work, so that the model is never the bottleneck of a long run:

- a topic's retained messages are consecutive ids in a ``TrimLog``, so ``consume``,
  ``seek`` and ``get_latest_msg`` are index arithmetic, never a scan;
- acked pages always form a prefix of the closed pages (a page is acked when every group's
  position is past its ``end_id``, and ``end_id`` grows along the log), so each topic keeps
  a pointer ``acked_pages`` and the byte total of that prefix; acking and retention only
  walk the pages they change;
- each topic caches its ``TopicState`` until it changes, so ``snapshot`` costs only the
  topics touched since the last one.

The SPEC's rules are quoted in comments where they are applied.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from rmqsim.model.api import (
    Clock,
    ConsumerMessage,
    GroupExistsError,
    GroupNotFoundError,
    MQConfig,
    NotServingError,
    Page,
    ProducerMessage,
    State,
    TopicNotFoundError,
    TopicState,
    validate_count,
    validate_messages,
    validate_msg_id,
    validate_name,
)
from rmqsim.model.log import TrimLog

__all__ = ["ReferenceMQ"]

#: Position of a group that reads from the earliest retained message (SPEC "group").
FROM_EARLIEST = -1


def _wall_clock() -> int:
    return int(time.time())


@dataclass(slots=True, eq=False)
class _Topic:
    """One topic's mutable state. Its name's id high-water mark lives in ``ReferenceMQ``
    because it outlives the topic (SPEC "Message ids")."""

    #: Id of ``messages[0]``; meaningful only while ``messages`` is non-empty.
    first_id: int
    messages: TrimLog[ConsumerMessage] = field(default_factory=TrimLog)
    pages: TrimLog[Page] = field(default_factory=TrimLog)
    #: ``pages[:acked_pages]`` are acked, the rest are not (acked pages are a prefix).
    acked_pages: int = 0
    acked_bytes: int = 0
    open_page_bytes: int = 0
    groups: dict[str, int] = field(default_factory=dict)
    #: The ``TopicState`` as of the last snapshot; None once the topic changed.
    cached: TopicState | None = None

    @property
    def last_retained_id(self) -> int:
        """Highest retained id, or ``first_id - 1`` when nothing is retained."""
        return self.first_id + len(self.messages) - 1

    def is_retained(self, msg_id: int) -> bool:
        return self.first_id <= msg_id <= self.last_retained_id

    def copy(self) -> _Topic:
        """An independent copy; messages and pages are immutable, so they are shared."""
        return _Topic(
            first_id=self.first_id,
            messages=self.messages.copy(),
            pages=self.pages.copy(),
            acked_pages=self.acked_pages,
            acked_bytes=self.acked_bytes,
            open_page_bytes=self.open_page_bytes,
            groups=dict(self.groups),
            cached=self.cached,
        )

    def check_invariants(self, last_id: int) -> None:
        assert 0 <= self.acked_pages <= len(self.pages)
        assert self.acked_bytes >= 0
        assert self.open_page_bytes >= 0
        assert self.last_retained_id <= last_id
        if self.messages:
            assert self.messages[0].msg_id == self.first_id
            assert self.messages[len(self.messages) - 1].msg_id == self.last_retained_id
        if self.pages:
            # The oldest retained page ends inside or after the retained messages.
            assert self.pages[0].end_id >= self.first_id
            assert self.pages[len(self.pages) - 1].end_id <= last_id
        for position in self.groups.values():
            assert position == FROM_EARLIEST or 0 <= position <= last_id + 1, position


class ReferenceMQ:
    """The reference model of the queue (SPEC.md). Pure, in memory, single-threaded.

    Every public method checks, in this order: closed, arguments, topic, group; and an
    operation that raises has changed nothing (all checks run before the first mutation).
    """

    def __init__(self, config: MQConfig | None = None, clock: Clock | None = None) -> None:
        if config is None:
            config = MQConfig()
        if not isinstance(config, MQConfig):
            raise TypeError(f"config must be an MQConfig, got {type(config).__name__}")
        self.config = config
        self._clock: Clock = clock if clock is not None else _wall_clock
        self._topics: dict[str, _Topic] = {}
        #: Highest id ever issued per name, destroyed topics' names included.
        self._last_ids: dict[str, int] = {}
        self._closed = False

    # ------------------------------------------------------------------ helpers

    def _now(self) -> int:
        now = self._clock()
        assert isinstance(now, int), f"the clock must return int seconds, got {now!r}"
        return now

    def _check_open(self) -> None:
        if self._closed:
            raise NotServingError("the queue is closed")

    def _topic(self, topic: str) -> _Topic:
        state = self._topics.get(topic)
        if state is None:
            raise TopicNotFoundError(f"topic {topic[:80]!r} does not exist")
        return state

    @staticmethod
    def _require_group(state: _Topic, topic: str, group: str) -> None:
        if group not in state.groups:
            raise GroupNotFoundError(f"group {group[:80]!r} of topic {topic[:80]!r} does not exist")

    def _update_acks(self, state: _Topic) -> None:
        """Ack every closed page that every group has read past (SPEC "Acks").

        "A closed page is acked once every group of its topic has read past it: the topic
        has at least one group, and for every group, position > end_id." The smallest
        position decides; -1 is below every end_id, so it acks nothing. A page keeps the
        acked_ts of the first moment that held.
        """
        if not state.groups:
            return
        min_position = min(state.groups.values())
        now: int | None = None
        while state.acked_pages < len(state.pages):
            page = state.pages[state.acked_pages]
            if not min_position > page.end_id:
                break
            assert page.acked_ts is None
            if now is None:
                now = self._now()
            state.pages[state.acked_pages] = replace(page, acked_ts=now)
            state.acked_pages += 1
            state.acked_bytes += page.size_bytes
            state.cached = None

    def _delete_through(self, state: _Topic, page_count: int, page_bytes: int) -> None:
        """Delete the oldest ``page_count`` acked pages and every message up to the last
        one's ``end_id`` (SPEC "Retention")."""
        assert 0 < page_count <= state.acked_pages
        end_id = state.pages[page_count - 1].end_id
        state.pages.trim(page_count)
        state.acked_pages -= page_count
        state.acked_bytes -= page_bytes
        dead_messages = max(0, min(end_id, state.last_retained_id) - state.first_id + 1)
        state.messages.trim(dead_messages)
        state.first_id = max(state.first_id, end_id + 1)
        state.cached = None

    # ------------------------------------------------------------------ topics

    def create_topic(self, topic: str) -> None:
        """Create an empty topic; an existing topic is left as it is."""
        self._check_open()
        validate_name("topic", topic)
        if topic in self._topics:
            return
        self._topics[topic] = _Topic(first_id=self._last_ids.get(topic, 0) + 1)

    def destroy_topic(self, topic: str) -> None:
        """Remove the topic with its messages, pages, acks and groups; its name keeps its
        id high-water mark, so a re-created topic never reuses an id."""
        self._check_open()
        validate_name("topic", topic)
        self._topic(topic)
        del self._topics[topic]

    # ------------------------------------------------------------------ groups

    def create_consumer_group(self, topic: str, group: str) -> None:
        """Create a group reading from the earliest retained message (position -1)."""
        self._check_open()
        validate_name("topic", topic)
        validate_name("group", group)
        state = self._topic(topic)
        if group in state.groups:
            raise GroupExistsError(f"group {group[:80]!r} of topic {topic[:80]!r} exists")
        state.groups[group] = FROM_EARLIEST
        self._update_acks(state)

    def destroy_consumer_group(self, topic: str, group: str) -> None:
        """Remove a group (absent is fine); pages it alone held back become acked."""
        self._check_open()
        validate_name("topic", topic)
        validate_name("group", group)
        state = self._topic(topic)
        if state.groups.pop(group, None) is not None:
            self._update_acks(state)

    def exist_consumer_group(self, topic: str, group: str) -> bool:
        """Whether the group exists; false for an absent topic too."""
        self._check_open()
        validate_name("topic", topic)
        validate_name("group", group)
        state = self._topics.get(topic)
        return state is not None and group in state.groups

    # ------------------------------------------------------------------ messages

    def produce(self, topic: str, messages: Sequence[ProducerMessage]) -> list[int]:
        """Append ``messages`` with fresh consecutive ids and update the open page."""
        self._check_open()
        validate_name("topic", topic)
        batch = validate_messages(messages)
        state = self._topic(topic)
        if not batch:
            return []
        page_size_bytes = self.config.page_size_bytes
        last_id = self._last_ids.get(topic, 0)
        if not state.messages:
            # Nothing retained: the next id starts the run of retained ids.
            state.first_id = last_id + 1
        now: int | None = None
        ids: list[int] = []
        for message in batch:
            last_id += 1
            ids.append(last_id)
            frozen_properties = MappingProxyType(dict(message.properties))
            state.messages.append(ConsumerMessage(last_id, message.payload, frozen_properties))
            size_bytes = len(message.payload)
            # "if open + size > page_size_bytes (strict), the page closes with
            # end_id = this message's id, size = open + size, closed_ts = now"
            if state.open_page_bytes + size_bytes > page_size_bytes:
                if now is None:
                    now = self._now()
                state.pages.append(Page(last_id, state.open_page_bytes + size_bytes, now, None))
                state.open_page_bytes = 0
            else:
                state.open_page_bytes += size_bytes
        self._last_ids[topic] = last_id
        state.cached = None
        assert state.last_retained_id == last_id
        return ids

    def consume(self, topic: str, group: str, n: int) -> list[ConsumerMessage]:
        """Return up to ``n`` retained messages from the group's position and move it past
        the last one returned."""
        self._check_open()
        validate_name("topic", topic)
        validate_name("group", group)
        validate_count(n)
        state = self._topic(topic)
        self._require_group(state, topic, group)
        if n == 0 or not state.messages:
            return []
        start_id = max(state.groups[group], state.first_id)
        if start_id > state.last_retained_id:
            return []
        offset = start_id - state.first_id
        found = state.messages.slice(offset, offset + n)
        assert found and found[0].msg_id == start_id
        state.groups[group] = found[-1].msg_id + 1
        self._update_acks(state)
        # Callers get their own dicts; the stored read-only ones stay untouched.
        return [ConsumerMessage(m.msg_id, m.payload, dict(m.properties)) for m in found]

    def seek(self, topic: str, group: str, msg_id: int) -> None:
        """Move the group to a retained ``msg_id`` (either way), or to -1 if there is none."""
        self._check_open()
        validate_name("topic", topic)
        validate_name("group", group)
        validate_msg_id(msg_id)
        state = self._topic(topic)
        self._require_group(state, topic, group)
        state.groups[group] = msg_id if state.is_retained(msg_id) else FROM_EARLIEST
        self._update_acks(state)

    def seek_to_latest(self, topic: str, group: str) -> None:
        """Move the group past the latest retained message, or to 0 if none is retained."""
        self._check_open()
        validate_name("topic", topic)
        validate_name("group", group)
        state = self._topic(topic)
        self._require_group(state, topic, group)
        state.groups[group] = state.last_retained_id + 1 if state.messages else 0
        self._update_acks(state)

    def get_latest_msg(self, topic: str) -> int:
        """The highest retained id of the topic, or -1."""
        self._check_open()
        validate_name("topic", topic)
        state = self._topic(topic)
        return state.last_retained_id if state.messages else -1

    # ------------------------------------------------------------------ retention

    def run_retention(self) -> None:
        """One retention pass over every topic at the clock's now (SPEC "Retention")."""
        self._check_open()
        retention_time_s = self.config.retention_time_s
        retention_size_bytes = self.config.retention_size_bytes
        if retention_time_s == -1 and retention_size_bytes == -1:
            return
        now = self._now()
        for name in sorted(self._topics):
            state = self._topics[name]
            # Only the acked prefix is ever a candidate: "stopping at the first page that
            # is not acked", and "total = the sum of those pages' sizes".
            total_bytes = state.acked_bytes
            deleted_bytes = 0
            count = 0
            if retention_time_s != -1:
                while count < state.acked_pages:
                    page = state.pages[count]
                    assert page.acked_ts is not None
                    if not page.acked_ts + retention_time_s < now:
                        break
                    deleted_bytes += page.size_bytes
                    count += 1
            if retention_size_bytes != -1:
                while count < state.acked_pages:
                    page = state.pages[count]
                    if not total_bytes - (deleted_bytes + page.size_bytes) > retention_size_bytes:
                        break
                    deleted_bytes += page.size_bytes
                    count += 1
            if count:
                self._delete_through(state, count, deleted_bytes)
            state.check_invariants(self._last_ids.get(name, 0))

    # ------------------------------------------------------------------ state

    def snapshot(
        self,
        topics: Iterable[str] | None = None,
        messages_from: Mapping[str, int] | None = None,
    ) -> State:
        """The whole logical state, canonical and frozen (SPEC "State").

        Two optional extensions of the protocol let a checker look at only what an
        operation touched: ``topics`` restricts the state to those topics and their groups;
        ``messages_from[t]`` lists only topic ``t``'s messages with id >= that value.
        """
        self._check_open()
        if topics is None:
            selected = list(self._topics.items())
        else:
            selected = [(name, self._topics[name]) for name in topics if name in self._topics]
        result: dict[str, TopicState] = {}
        groups: dict[tuple[str, str], int] = {}
        for name, state in selected:
            if messages_from is not None and name in messages_from:
                # Just the tail: a checker asks for it after every produce, which also
                # drops the cached whole state, so building that here would cost a copy of
                # every retained message per operation.
                start = min(max(0, messages_from[name] - state.first_id), len(state.messages))
                result[name] = TopicState(
                    tuple(state.messages.slice(start, len(state.messages))),
                    tuple(state.pages) if state.cached is None else state.cached.pages,
                    state.open_page_bytes,
                    self._last_ids.get(name, 0),
                )
            else:
                if state.cached is None:
                    state.cached = TopicState(
                        tuple(state.messages),
                        tuple(state.pages),
                        state.open_page_bytes,
                        self._last_ids.get(name, 0),
                    )
                result[name] = state.cached
            for group, position in state.groups.items():
                groups[(name, group)] = position
        return State.build(result, groups)

    def close(self) -> None:
        """Stop serving; every later call but ``close`` raises NotServingError."""
        self._closed = True

    def reopen(self) -> None:
        """Serve again, with the same state: what reopening a durable store after a close
        or a crash gives (the model as a SUT, ``conformance.adapter``, keeps one model per
        path and reopens it this way)."""
        self._closed = False

    # ------------------------------------------------------------------ introspection

    def peek(self, topic: str, group: str) -> tuple[int, int | None, int | None] | None:
        """``(last_id, first retained id or None, group position or None)`` of a live
        topic, or None: what a checker needs before an operation to name an anomaly,
        without building a ``State`` (the runner asks before every operation)."""
        state = self._topics.get(topic)
        if state is None:
            return None
        first = state.first_id if state.messages else None
        return self._last_ids.get(topic, 0), first, state.groups.get(group)

    def check_invariants(self) -> None:
        """Assert every internal invariant (used by tests and the lockstep runner)."""
        for name, state in self._topics.items():
            state.check_invariants(self._last_ids.get(name, 0))

    def fork(self) -> ReferenceMQ:
        """An independent copy of this model sharing its config and clock: the state to
        return to when a crash resolves to "before the operation"."""
        clone = ReferenceMQ(self.config, self._clock)
        clone._topics = {name: state.copy() for name, state in self._topics.items()}
        clone._last_ids = dict(self._last_ids)
        clone._closed = self._closed
        return clone
