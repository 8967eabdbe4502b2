"""Milvus's RocksMQ behaviours that SPEC.md corrects, each seeded back into ``impl.RocksMQ``.

Every **[Milvus: ...]** note of SPEC.md is one mutant here (the crash-consistency ones,
produce in two steps and positions in memory only, live in ``crash``). Each class is the
real implementation with one method or seam overridden to behave as the Go code does; the
module-level factories are what ``--impl conformance.mutants.milvus:<factory>`` loads.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from rmqsim.conformance.mutants import Mutant
from rmqsim.conformance.mutants.base import factory_of
from rmqsim.impl import RocksMQ, keys
from rmqsim.impl.rocksmq import CachedTopic
from rmqsim.impl.storage import Plan, Store
from rmqsim.model.api import ConsumerMessage, validate_name

__all__ = [
    "MUTANTS",
    "AckOffByOne",
    "AckRegisteredOnly",
    "DecimalKeys",
    "DestroyByPrefix",
    "DestroyGroupKeepsAcks",
    "DestroyKeepsMessages",
    "EmptyPayloadNone",
    "GroupWithoutTopic",
    "IdsRestart",
    "LatestBySubstring",
    "SeekBackwardPanics",
    "ack_off_by_one",
    "ack_registered_only",
    "decimal_keys",
    "destroy_by_prefix",
    "destroy_group_keeps_acks",
    "destroy_keeps_messages",
    "empty_payload_none",
    "group_without_topic",
    "ids_restart",
    "latest_by_substring",
    "seek_backward_panics",
]

_TAG_INCARNATION = struct.Struct(">cQ")


class _DecimalMessageKeys:
    """Message keys as Milvus writes them: the id as an unpadded decimal string (after the
    layout's tag and incarnation)."""

    @staticmethod
    def msg_key(incarnation: int, msg_id: int) -> bytes:
        return _TAG_INCARNATION.pack(keys.TAG_MSG, incarnation) + str(msg_id).encode("ascii")

    @staticmethod
    def msg_range(
        incarnation: int, first_id: int = 0, end_id_exclusive: int | None = None
    ) -> tuple[bytes, bytes]:
        begin = _DecimalMessageKeys.msg_key(incarnation, first_id)
        if end_id_exclusive is None:
            return begin, _TAG_INCARNATION.pack(keys.TAG_MSG, incarnation + 1)
        return begin, _DecimalMessageKeys.msg_key(incarnation, end_id_exclusive)

    @staticmethod
    def parse_msg_key(key: bytes) -> tuple[int, int]:
        return _TAG_INCARNATION.unpack_from(key)[1], int(key[_TAG_INCARNATION.size :])


class _DecimalKeyStore(Store):
    message_keys = _DecimalMessageKeys


class DecimalKeys(RocksMQ):
    """Bug class: key encoding. Message ids are stored as unpadded decimal strings, so byte
    order (``"10" < "9"``) is not id order: range reads, retention's "every id <= end_id"
    deletes and the bounds checked on open all go wrong from id 10 on."""

    store_class = _DecimalKeyStore


class DestroyKeepsMessages(RocksMQ):
    """Bug class: incomplete delete. ``destroy_topic`` removes the topic's records but leaves
    its messages in the store (Milvus: they reappear after re-create)."""

    def write_plan(self, operation: str, plan: Plan) -> None:
        if operation == "destroy_topic":
            plan = replace(plan, msg_range_deletes=[])
        super().write_plan(operation, plan)


class DestroyByPrefix(RocksMQ):
    """Bug class: prefix confusion. Destroying topic ``t`` also deletes the page metadata of
    every topic whose name starts with ``t`` (Milvus deletes by bare string prefix)."""

    def destroy_topic(self, topic: str) -> None:
        super().destroy_topic(topic)
        for name in sorted(self._topics):
            if name != topic and name.startswith(topic):
                with self._locked(name) as cached:
                    doomed = Plan(meta_range_deletes=[keys.page_range(cached.incarnation)])
                    self.write_plan("destroy_topic", doomed)
                    cached.pages.clear()
                    cached.acked_count = 0


class LatestBySubstring(RocksMQ):
    """Bug class: name matching and missing checks. ``get_latest_msg`` of an unknown topic
    returns -1 instead of raising, and a topic with nothing retained lands on the last key of
    a topic whose name ends with its own (``strings.Contains``), whose id it cannot parse."""

    def get_latest_msg(self, topic: str) -> int:
        self._check_serving()
        validate_name("topic", topic)
        if topic not in self._topics:
            return -1
        latest = super().get_latest_msg(topic)
        if latest == -1:
            for name, other in sorted(self._topics.items()):
                if name != topic and name.endswith(topic) and other.latest_retained() != -1:
                    key = f"{name}/{other.latest_retained()}"
                    raise ValueError(f'strconv.ParseInt: parsing "{key[len(topic) + 1 :]}"')
        return latest


class AckOffByOne(RocksMQ):
    """Bug class: off-by-one. A page counts as read by a group when ``end_id <= position``,
    so the page holding a lagging group's next message is acked (and may be retained away)."""

    def ack_floor(self, topic: str, positions: Mapping[str, int]) -> int:
        floor = super().ack_floor(topic, positions)
        return floor + 1 if floor >= 0 else floor


class AckRegisteredOnly(RocksMQ):
    """Bug class: wrong set of participants. Acks count only consumers registered in this
    process (Milvus: a group that has not started reading since the last start does not hold
    pages back), so a new or idle group's unread pages are acked under it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: (topic, group) of consumers registered since open: memory only, as in Milvus.
        self._registered: set[tuple[str, str]] = set()

    def consume(self, topic: str, group: str, n: int) -> list[ConsumerMessage]:
        self._registered.add((topic, group))
        return super().consume(topic, group, n)

    def ack_floor(self, topic: str, positions: Mapping[str, int]) -> int:
        counted = {g: p for g, p in positions.items() if (topic, g) in self._registered}
        return super().ack_floor(topic, counted)


class DestroyGroupKeepsAcks(RocksMQ):
    """Bug class: missed re-evaluation. Destroying a lagging group never acks the pages it
    alone held back (Milvus re-evaluates acks only when a position moves)."""

    _destroying_group = False

    def destroy_consumer_group(self, topic: str, group: str) -> None:
        self._destroying_group = True
        try:
            super().destroy_consumer_group(topic, group)
        finally:
            self._destroying_group = False

    def ack_floor(self, topic: str, positions: Mapping[str, int]) -> int:
        return -1 if self._destroying_group else super().ack_floor(topic, positions)


class EmptyPayloadNone(RocksMQ):
    """Bug class: empty versus absent. A message with an empty payload comes back with
    payload ``None`` and properties ``None`` (Go's nil) instead of ``b""`` and its properties."""

    def consume(self, topic: str, group: str, n: int) -> list[ConsumerMessage]:
        return [
            ConsumerMessage(m.msg_id, None, None) if m.payload == b"" else m  # type: ignore[arg-type]  # the bug: Go's nil
            for m in super().consume(topic, group, n)
        ]


class IdsRestart(RocksMQ):
    """Bug class: id reuse. Ids are rebuilt from the highest id still stored (Milvus), not
    from a persisted high-water mark: after retention empties a topic (and a restart), or
    after destroy and re-create, ids start again from 1."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for cached in self._topics.values():
            self._rebuild_ids(cached)

    def create_topic(self, topic: str) -> None:
        super().create_topic(topic)
        cached = self._topics.get(topic)
        if cached is not None:
            self._rebuild_ids(cached)

    @staticmethod
    def _rebuild_ids(cached: Any) -> None:
        if cached.latest_retained() == -1:  # nothing stored: nothing to continue from
            cached.last_id = cached.trim_id = 0


class GroupWithoutTopic(RocksMQ):
    """Bug class: missing existence check. ``create_consumer_group`` on a topic that does not
    exist succeeds (Milvus stores the position in memory without looking at the topic)."""

    def create_consumer_group(self, topic: str, group: str) -> None:
        self._check_serving()
        validate_name("topic", topic)
        validate_name("group", group)
        if topic not in self._topics:
            return
        super().create_consumer_group(topic, group)


class SeekBackwardPanics(RocksMQ):
    """Bug class: refused legal transition. Moving a group's position backward (a backward
    seek, or a reset to -1 after it advanced) fails (Milvus panics the process)."""

    def move_group(self, cached: CachedTopic, operation: str, group: str, position: int) -> None:
        if position < cached.groups[group]:
            raise RuntimeError("move consume position backward")
        super().move_group(cached, operation, group, position)


decimal_keys = factory_of(DecimalKeys)
destroy_keeps_messages = factory_of(DestroyKeepsMessages)
destroy_by_prefix = factory_of(DestroyByPrefix)
latest_by_substring = factory_of(LatestBySubstring)
ack_off_by_one = factory_of(AckOffByOne)
ack_registered_only = factory_of(AckRegisteredOnly)
destroy_group_keeps_acks = factory_of(DestroyGroupKeepsAcks)
empty_payload_none = factory_of(EmptyPayloadNone)
ids_restart = factory_of(IdsRestart)
group_without_topic = factory_of(GroupWithoutTopic)
seek_backward_panics = factory_of(SeekBackwardPanics)

_MODULE = __name__
MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "decimal-keys",
        "milvus",
        "message keys are unpadded decimal strings: byte order differs from id order",
        f"{_MODULE}:decimal_keys",
    ),
    Mutant(
        "destroy-keeps-messages",
        "milvus",
        "destroy_topic leaves the topic's messages in the store",
        f"{_MODULE}:destroy_keeps_messages",
    ),
    Mutant(
        "destroy-by-prefix",
        "milvus",
        "destroy_topic(t) deletes the page metadata of every topic whose name starts with t",
        f"{_MODULE}:destroy_by_prefix",
    ),
    Mutant(
        "latest-by-substring",
        "milvus",
        "get_latest_msg: -1 for an unknown topic; substring match sees another topic's key",
        f"{_MODULE}:latest_by_substring",
    ),
    Mutant(
        "ack-off-by-one",
        "milvus",
        "a page is acked when end_id <= position (a lagging group's next page is acked)",
        f"{_MODULE}:ack_off_by_one",
    ),
    Mutant(
        "ack-registered-only",
        "milvus",
        "acks count only groups that consumed since open; idle groups hold nothing back",
        f"{_MODULE}:ack_registered_only",
    ),
    Mutant(
        "destroy-group-keeps-acks",
        "milvus",
        "destroying a lagging group never acks the pages it held back",
        f"{_MODULE}:destroy_group_keeps_acks",
    ),
    Mutant(
        "empty-payload-none",
        "milvus",
        "an empty payload is delivered as None with None properties",
        f"{_MODULE}:empty_payload_none",
    ),
    Mutant(
        "ids-restart",
        "milvus",
        "ids rebuilt from the highest stored id: they restart after retention or re-create",
        f"{_MODULE}:ids_restart",
    ),
    Mutant(
        "group-without-topic",
        "milvus",
        "create_consumer_group does not check that the topic exists",
        f"{_MODULE}:group_without_topic",
    ),
    Mutant(
        "seek-backward-panics",
        "milvus",
        "moving a position backward (seek back, reset to -1) raises instead of moving",
        f"{_MODULE}:seek_backward_panics",
    ),
)
