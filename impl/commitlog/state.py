"""The queue's metadata as a value rebuilt from events, and its checkpoint encoding.

Every change of metadata is an *event* written to the commit log in the same batch as the
operation's messages: a message record (its id, payload size and whether it closed the
page) or a control record whose body is one JSON event. ``apply_message`` and
``apply_event`` (and ``apply_messages``, which ``apply_message`` is for one record) are
the only code that changes a ``Meta``: a live operation writes its
events and then applies them, recovery reads them back and applies the same functions,
so the recovered metadata cannot differ from what the operations made.

The checkpoint (``encode_checkpoint``) is a ``Meta`` as JSON, with the commit-log offset
it is valid at; recovery starts from the newest checkpoint and replays what follows.
"""

from __future__ import annotations

import bisect
import itertools
import json
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from rmqsim.model.api import Page

__all__ = [
    "CHECKPOINT_FORMAT",
    "CheckpointError",
    "Meta",
    "TopicMeta",
    "apply_event",
    "apply_message",
    "apply_message_run",
    "apply_messages",
    "decode_checkpoint",
    "encode_checkpoint",
    "page_closings",
]

CHECKPOINT_FORMAT = 1


class CheckpointError(ValueError):
    """A checkpoint file that does not decode (the reason says why)."""


@dataclass(slots=True, eq=False)
class TopicMeta:
    """One live topic: ids in ``(trim_id, last_id]`` are retained; ``base_id`` is the id
    of the incarnation's consume-queue entry 0."""

    name: str
    incarnation: int
    base_id: int
    last_id: int
    trim_id: int
    open_page_bytes: int = 0
    pages: list[Page] = field(default_factory=list)
    acked_count: int = 0
    groups: dict[str, int] = field(default_factory=dict)

    def latest_retained(self) -> int:
        return self.last_id if self.last_id > self.trim_id else -1

    def cq_index(self, msg_id: int) -> int:
        return msg_id - self.base_id


@dataclass(slots=True, eq=False)
class Meta:
    """All metadata: live topics by name and by incarnation, and per name the highest id
    ever issued (kept across destroy, so ids are never reused)."""

    next_incarnation: int = 1
    high_water_marks: dict[str, int] = field(default_factory=dict)
    topics: dict[str, TopicMeta] = field(default_factory=dict)
    by_incarnation: dict[int, TopicMeta] = field(default_factory=dict)

    def add(self, topic: TopicMeta) -> None:
        self.topics[topic.name] = topic
        self.by_incarnation[topic.incarnation] = topic


def apply_message(
    meta: Meta, incarnation: int, msg_id: int, size_bytes: int, closes_page: bool, now: int
) -> TopicMeta | None:
    """A message record: the id is issued and the open page grows or closes. Returns the
    topic, or None for a record of a destroyed incarnation (replay of old records)."""
    return apply_messages(meta, incarnation, msg_id, [(size_bytes, closes_page, now)])


def apply_messages(
    meta: Meta, incarnation: int, first_id: int, messages: Sequence[tuple[int, bool, int]]
) -> TopicMeta | None:
    """``apply_message`` of consecutive message records, ids from ``first_id`` on, each
    given as ``(size_bytes, closes_page, now)``: one lookup and one id check per run, as a
    produce writes them (``apply_message`` is this for one record)."""
    topic = _run_topic(meta, incarnation, first_id)
    if topic is None or not messages:
        return topic
    open_bytes = topic.open_page_bytes
    for msg_id, (size_bytes, closes_page, now) in enumerate(messages, start=first_id):
        if closes_page:
            topic.pages.append(Page(msg_id, open_bytes + size_bytes, now, None))
            open_bytes = 0
        else:
            open_bytes += size_bytes
    _end_run(meta, topic, open_bytes, first_id + len(messages) - 1)
    return topic


def page_closings(
    open_page_bytes: int, body_lengths: Sequence[int], page_size_bytes: int
) -> list[int]:
    """Which of consecutive messages (by index) close their topic's page, the open page
    holding ``open_page_bytes`` before them: one that takes it past ``page_size_bytes``
    closes it (itself included; SPEC "Pages"), as ``produce`` decides message by message.
    Found by bisecting the running total, a step per page closed, not per message."""
    totals = list(itertools.accumulate(body_lengths, initial=open_page_bytes))
    closing: list[int] = []
    base, low = 0, 1
    while True:
        index = bisect.bisect_right(totals, base + page_size_bytes, lo=low)
        if index >= len(totals):
            return closing
        closing.append(index - 1)
        base, low = totals[index], index + 1


def apply_message_run(
    meta: Meta, incarnation: int, first_id: int, body_lengths: Sequence[int],
    closing: Sequence[int], now: int,
) -> TopicMeta | None:  # fmt: skip
    """``apply_messages`` of consecutive messages stored at ``now``, given by their body
    lengths and the indices of those that close a page (``page_closings``): the same
    changes, with a step per page closed rather than per message."""
    topic = _run_topic(meta, incarnation, first_id)
    if topic is None or not body_lengths:
        return topic
    open_bytes, start = topic.open_page_bytes, 0
    for index in closing:
        page_bytes = open_bytes + sum(body_lengths[start : index + 1])
        topic.pages.append(Page(first_id + index, page_bytes, now, None))
        open_bytes, start = 0, index + 1
    _end_run(meta, topic, open_bytes + sum(body_lengths[start:]), first_id + len(body_lengths) - 1)
    return topic


def _run_topic(meta: Meta, incarnation: int, first_id: int) -> TopicMeta | None:
    """The live topic of ``incarnation`` that a run of messages from ``first_id`` on
    extends (None: destroyed), its ids checked to follow on (the log is read from disk)."""
    topic = meta.by_incarnation.get(incarnation)
    if topic is not None and first_id != topic.last_id + 1:
        raise ValueError(f"message id {first_id} follows {topic.last_id} in {topic.name!r}")
    return topic


def _end_run(meta: Meta, topic: TopicMeta, open_page_bytes: int, last_id: int) -> None:
    topic.open_page_bytes = open_page_bytes
    topic.last_id = last_id
    meta.high_water_marks[topic.name] = last_id


def _ack(topic: TopicMeta, ack_end_id: int | None, now: int) -> None:
    if ack_end_id is None:
        return
    index = topic.acked_count
    while index < len(topic.pages) and topic.pages[index].end_id <= ack_end_id:
        topic.pages[index] = replace(topic.pages[index], acked_ts=now)
        index += 1
    topic.acked_count = index


def apply_event(meta: Meta, event: dict[str, Any]) -> None:
    """A control event (see ``queue``): change ``meta`` as the operation did."""
    op = event["op"]
    if op == "create_topic":
        name, inc = event["name"], event["inc"]
        last_id = meta.high_water_marks.get(name, 0)
        meta.add(TopicMeta(name, inc, last_id + 1, last_id, last_id))
        meta.next_incarnation = max(meta.next_incarnation, inc + 1)
        return
    topic = meta.by_incarnation.get(event.get("inc", -1))
    if op == "retention":
        for inc, trim_id in event["trims"]:
            _trim(meta.by_incarnation[inc], trim_id)
        return
    if topic is None:
        raise ValueError(f"event {op} names incarnation {event.get('inc')}, which is not live")
    if op == "destroy_topic":
        del meta.topics[topic.name]
        del meta.by_incarnation[topic.incarnation]
    elif op == "create_group":
        topic.groups[event["group"]] = -1
    elif op == "destroy_group":
        topic.groups.pop(event["group"], None)
        _ack(topic, event["ack_end_id"], event["ts"])
    elif op == "move":
        topic.groups[event["group"]] = event["position"]
        _ack(topic, event["ack_end_id"], event["ts"])
    else:
        raise ValueError(f"unknown event {op!r}")


def _trim(topic: TopicMeta, trim_id: int) -> None:
    count = sum(1 for page in topic.pages if page.end_id <= trim_id)
    del topic.pages[:count]
    topic.acked_count = max(topic.acked_count - count, 0)
    topic.trim_id = trim_id


# --------------------------------------------------------------------------- checkpoint


def encode_checkpoint(meta: Meta, log_offset: int) -> bytes:
    """``meta`` at commit-log offset ``log_offset``: CRC32 (4 bytes) then canonical JSON."""
    topics = [
        {
            "name": t.name,
            "inc": t.incarnation,
            "base_id": t.base_id,
            "last_id": t.last_id,
            "trim_id": t.trim_id,
            "open_page_bytes": t.open_page_bytes,
            "pages": [[p.end_id, p.size_bytes, p.closed_ts, p.acked_ts] for p in t.pages],
            "groups": dict(sorted(t.groups.items())),
        }
        for t in sorted(meta.topics.values(), key=lambda t: t.incarnation)
    ]
    document = {
        "format": CHECKPOINT_FORMAT,
        "log_offset": log_offset,
        "next_incarnation": meta.next_incarnation,
        "high_water_marks": dict(sorted(meta.high_water_marks.items())),
        "topics": topics,
    }
    body = json.dumps(document, sort_keys=True, separators=(",", ":")).encode()
    return zlib.crc32(body).to_bytes(4, "big") + body


def decode_checkpoint(data: bytes) -> tuple[Meta, int]:
    """``(meta, log_offset)`` of a checkpoint; ``CheckpointError`` if it is damaged."""
    if len(data) < 4 or zlib.crc32(data[4:]).to_bytes(4, "big") != data[:4]:
        raise CheckpointError("its CRC does not match (torn or damaged)")
    try:
        document = json.loads(data[4:])
        if document["format"] != CHECKPOINT_FORMAT:
            raise CheckpointError(f"unknown format {document['format']!r}")
        meta = Meta(document["next_incarnation"], dict(document["high_water_marks"]))
        for t in document["topics"]:
            pages = [Page(*page) for page in t["pages"]]
            acked = sum(1 for page in pages if page.acked_ts is not None)
            meta.add(
                TopicMeta(
                    t["name"],
                    t["inc"],
                    t["base_id"],
                    t["last_id"],
                    t["trim_id"],
                    t["open_page_bytes"],
                    pages,
                    acked,
                    dict(t["groups"]),
                )
            )
        return meta, int(document["log_offset"])
    except (ValueError, KeyError, TypeError) as exc:
        if isinstance(exc, CheckpointError):
            raise
        raise CheckpointError(f"it does not decode: {exc}") from None
