"""What the actors believe about the queue, learned only from outcomes.

The beliefs steer the actors towards meaningful operations (produce to a topic that exists,
consume from a group that exists, seek to an id that was issued) so that error outcomes are a
minority rather than the norm. They are heuristics, never a second model: a wrong belief only
makes an operation less interesting, and every error outcome corrects the belief it
contradicts (TopicNotFound forgets the topic, GroupExists learns the group, ...).

Determinism: only lists and insertion-ordered dicts, filled in operation order; nothing here
iterates a set, so the actors' random choices over these sequences replay exactly.
"""

from __future__ import annotations

from rmqsim.scenarios.queue.ops import (
    Consume,
    CreateGroup,
    CreateTopic,
    Delivered,
    DestroyGroup,
    DestroyTopic,
    ExistGroup,
    GetLatest,
    Op,
    Outcome,
    Produce,
    Seek,
    SeekToLatest,
)

__all__ = ["World"]

#: The operations that name a group.
_GROUP_OPS = (CreateGroup, DestroyGroup, ExistGroup, Consume, Seek, SeekToLatest)


class World:
    """Believed queue state: existing topics and groups, and ids seen per topic name."""

    __slots__ = ("groups", "issued_max", "produced", "recent_first", "topics")

    def __init__(self) -> None:
        #: Topics believed to exist, in the order they were learned.
        self.topics: list[str] = []
        #: Per believed topic, its believed groups in the order they were learned.
        self.groups: dict[str, list[str]] = {}
        #: Highest id seen issued per topic *name*; kept across destroy/re-create, since SPEC
        #: never reuses an id under a name, so "never issued" stays above it.
        self.issued_max: dict[str, int] = {}
        #: First id of the most recent non-empty consume per topic: a rough lower edge of what
        #: is retained (ids below it were likely deleted by retention or consumed long ago).
        self.recent_first: dict[str, int] = {}
        #: Messages acknowledged as produced per topic name (statistics for tests and reports).
        self.produced: dict[str, int] = {}

    # ------------------------------------------------------------------ belief updates

    def add_topic(self, topic: str) -> None:
        """Believe ``topic`` exists."""
        if topic not in self.groups:
            self.topics.append(topic)
            self.groups[topic] = []

    def forget_topic(self, topic: str) -> None:
        """Believe ``topic`` (and with it all its groups) is gone."""
        if self.groups.pop(topic, None) is not None:
            self.topics.remove(topic)
        self.recent_first.pop(topic, None)

    def add_group(self, topic: str, group: str) -> None:
        """Believe ``group`` exists on ``topic`` (so the topic exists too)."""
        self.add_topic(topic)
        groups = self.groups[topic]
        if group not in groups:
            groups.append(group)

    def forget_group(self, topic: str, group: str) -> None:
        """Believe ``group`` is gone from ``topic``."""
        groups = self.groups.get(topic)
        if groups is not None and group in groups:
            groups.remove(group)

    def _saw_id(self, topic: str, msg_id: int) -> None:
        if msg_id > self.issued_max.get(topic, 0):
            self.issued_max[topic] = msg_id

    # ------------------------------------------------------------------ learning

    def learn(self, op: Op, outcome: Outcome) -> None:
        """Update beliefs from ``op`` and what it returned."""
        error = outcome.error
        if error is not None:
            self._learn_error(op, error)
            return
        value = outcome.value
        match op:
            case Produce():
                self._learn_produce(op, value)
            case Consume():
                self._learn_consume(op, value)
            case CreateTopic():
                self.add_topic(op.topic)
            case DestroyTopic():
                self.forget_topic(op.topic)
            case CreateGroup() | Seek() | SeekToLatest():
                self.add_group(op.topic, op.group)
            case DestroyGroup():
                self.forget_group(op.topic, op.group)
            case ExistGroup():
                self._learn_exist_group(op, value)
            case GetLatest():
                self._learn_get_latest(op, value)

    def _learn_error(self, op: Op, error: str) -> None:
        topic = getattr(op, "topic", None)
        if topic is None:
            return
        if error not in ("GroupNotFound", "GroupExists"):
            if error == "TopicNotFound":
                self.forget_topic(topic)
            return
        # SPEC raises these only for an operation that names a group.
        assert isinstance(op, _GROUP_OPS), f"{error} for {type(op).__name__}"
        if error == "GroupNotFound":
            self.forget_group(topic, op.group)
        else:
            self.add_group(topic, op.group)

    def _learn_produce(self, op: Produce, value: object) -> None:
        self.add_topic(op.topic)
        if type(value) is tuple and value:
            last = value[-1]
            if type(last) is int:
                self._saw_id(op.topic, last)
                self.produced[op.topic] = self.produced.get(op.topic, 0) + len(value)

    def _learn_consume(self, op: Consume, value: object) -> None:
        self.add_group(op.topic, op.group)
        if type(value) is tuple and value:
            first, last = value[0], value[-1]
            if type(first) is Delivered and type(last) is Delivered:
                self.recent_first[op.topic] = first.msg_id
                self._saw_id(op.topic, last.msg_id)

    def _learn_exist_group(self, op: ExistGroup, value: object) -> None:
        if value is True:
            self.add_group(op.topic, op.group)
        elif value is False:
            self.forget_group(op.topic, op.group)

    def _learn_get_latest(self, op: GetLatest, value: object) -> None:
        self.add_topic(op.topic)
        if type(value) is int:
            self._saw_id(op.topic, value)
