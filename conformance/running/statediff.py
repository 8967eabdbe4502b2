"""Compare two ``State`` values and say only what differs, and encode a ``State``
canonically (for trace digests and readable reports)."""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from rmqsim.model.api import ConsumerMessage, Page, State, TopicState

__all__ = [
    "MAX_LISTED",
    "Difference",
    "MessageDiff",
    "clip",
    "diff_states",
    "diff_topic",
    "state_digest",
    "state_to_json",
]

#: At most this many differences are listed per category; the rest are counted.
MAX_LISTED = 8


class MessageDiff(StrEnum):
    """What a ``messages`` difference is, as data: anomalies are named from it, never from
    the text of ``where`` (which holds the topic's name, and a name may hold any word)."""

    MISSING = "missing in sut"
    ONLY_IN_SUT = "only in sut"
    DUPLICATED = "duplicated in sut"
    ORDER = "order"


@dataclass(frozen=True, slots=True)
class Difference:
    """One place where the model (expected) and the SUT (actual) disagree.

    ``area`` is what it is about (``topic``, ``messages``, ``pages``, ``acks``,
    ``open_page``, ``last_id``, ``group``), ``where`` names the topic/group/id.
    """

    area: str
    where: str
    expected: Any
    actual: Any
    #: For message differences: which ids are affected (for anomaly classification).
    ids: tuple[int, ...] = ()
    #: For ``messages`` differences: which kind (None for every other area).
    kind: MessageDiff | None = None

    def render(self) -> str:
        return (
            f"{self.area:<10} {self.where}: model={_short(self.expected)} sut={_short(self.actual)}"
        )


def clip(text: str, limit: int = 160) -> str:
    """``text`` cut to ``limit`` characters with ``...`` (reports stay readable)."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _short(value: Any) -> str:
    return clip(repr(value))


def _id_ranges(ids: list[int]) -> str:
    """``[1,2,3,7]`` → ``"1-3,7"``: compact for reports."""
    parts: list[str] = []
    start: int | None = None
    prev = 0  # read only once start is set
    for i in ids:
        if start is None:
            start = prev = i
        elif i == prev + 1:
            prev = i
        else:
            parts.append(f"{start}-{prev}" if start != prev else f"{start}")
            start = prev = i
    if start is not None:
        parts.append(f"{start}-{prev}" if start != prev else f"{start}")
    return ",".join(parts)


def _id_differences(
    topic: str, missing: list[int], extra: list[int], duplicated: list[int]
) -> list[Difference]:
    """The ``messages`` differences of ids missing in, only in and duplicated in the SUT."""
    kinds = (
        (MessageDiff.MISSING, missing, True),
        (MessageDiff.ONLY_IN_SUT, extra, False),
        (MessageDiff.DUPLICATED, duplicated, False),
    )
    return [
        Difference(
            "messages",
            f"{topic} {kind.value}",
            _id_ranges(ids) if in_model else "-",
            "-" if in_model else _id_ranges(ids),
            tuple(ids),
            kind,
        )
        for kind, ids, in_model in kinds
        if ids
    ]


def _diff_messages(topic: str, model: tuple, sut: tuple) -> list[Difference]:
    by_id_model = {m.msg_id: m for m in model}
    by_id_sut: dict[int, Any] = {}
    duplicated: list[int] = []
    for m in sut:
        msg_id = getattr(m, "msg_id", None)
        if msg_id in by_id_sut:
            duplicated.append(msg_id)
        by_id_sut[msg_id] = m  # type: ignore[index]  # None too: a message without msg_id
    missing = sorted(set(by_id_model) - set(by_id_sut))
    extra = sorted(i for i in by_id_sut if isinstance(i, int) and i not in by_id_model)
    out = _id_differences(topic, missing, extra, sorted(set(duplicated)))
    changed = [
        i for i in sorted(set(by_id_model) & set(by_id_sut)) if by_id_model[i] != by_id_sut[i]
    ]
    for i in changed[:MAX_LISTED]:
        a, b = by_id_model[i], by_id_sut[i]
        out.append(
            Difference(
                "payload",
                f"{topic}#{i}",
                (a.payload, dict(a.properties)),
                (getattr(b, "payload", b), getattr(b, "properties", None)),
                (i,),
            )
        )
    if len(changed) > MAX_LISTED:
        out.append(Difference("payload", f"{topic}", f"{len(changed) - MAX_LISTED} more", "", ()))
    if not out and model != sut:  # same ids and contents but different order
        out.append(
            Difference(
                "messages",
                f"{topic} {MessageDiff.ORDER.value}",
                [m.msg_id for m in model],
                [getattr(m, "msg_id", m) for m in sut],
                kind=MessageDiff.ORDER,
            )
        )
    return out


def _diff_pages(topic: str, model: tuple[Page, ...], sut: tuple) -> list[Difference]:
    out: list[Difference] = []
    by_end_model = {p.end_id: p for p in model}
    by_end_sut = {getattr(p, "end_id", None): p for p in sut}
    for end_id in sorted(set(by_end_model) | {k for k in by_end_sut if isinstance(k, int)}):
        a, b = by_end_model.get(end_id), by_end_sut.get(end_id)
        if a == b:
            continue
        if (
            a is not None
            and b is not None
            and (a.size_bytes, a.closed_ts)
            == (getattr(b, "size_bytes", None), getattr(b, "closed_ts", None))
        ):
            out.append(
                Difference(
                    "acks",
                    f"{topic} page end_id={end_id} acked_ts",
                    a.acked_ts,
                    getattr(b, "acked_ts", None),
                    (end_id,),
                )
            )
        else:
            out.append(Difference("pages", f"{topic} page end_id={end_id}", a, b, (end_id,)))
    return out[: MAX_LISTED * 2]


def diff_topic(topic: str, model: TopicState | None, sut: TopicState | None) -> list[Difference]:
    """Differences within one topic (``None`` means the topic does not exist)."""
    if model == sut:
        return []
    if model is None or sut is None:
        return [
            Difference(
                "topic",
                topic,
                "absent" if model is None else "exists",
                "absent" if sut is None else "exists",
            )
        ]
    out: list[Difference] = []
    if model.last_id != getattr(sut, "last_id", None):
        out.append(Difference("last_id", topic, model.last_id, getattr(sut, "last_id", None)))
    if model.open_page_bytes != getattr(sut, "open_page_bytes", None):
        out.append(
            Difference(
                "open_page", topic, model.open_page_bytes, getattr(sut, "open_page_bytes", None)
            )
        )
    if model.pages != getattr(sut, "pages", None):
        out.extend(_diff_pages(topic, model.pages, tuple(getattr(sut, "pages", ()))))
    if model.messages != getattr(sut, "messages", None):
        out.extend(_diff_messages(topic, model.messages, tuple(getattr(sut, "messages", ()))))
    if not out:
        out.append(Difference("topic", topic, model, sut))
    return out


def diff_states(model: State, sut: State, topics: list[str] | None = None) -> list[Difference]:
    """Everything that differs between two states, optionally within ``topics`` only."""
    names = sorted(set(model.topics) | set(sut.topics)) if topics is None else sorted(topics)
    out: list[Difference] = []
    for name in names:
        out.extend(diff_topic(name, model.topics.get(name), sut.topics.get(name)))
    keys = sorted(set(model.groups) | set(sut.groups))
    for key in keys:
        if topics is not None and key[0] not in topics:
            continue
        a, b = model.groups.get(key), sut.groups.get(key)
        if a != b:
            out.append(
                Difference(
                    "group",
                    f"{key[0]}/{key[1]}",
                    "absent" if a is None else a,
                    "absent" if b is None else b,
                )
            )
    return out


# --------------------------------------------------------------------------- encoding


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _message_json(m: ConsumerMessage) -> list[Any]:
    return [m.msg_id, _b64(m.payload), dict(sorted(dict(m.properties).items()))]


def state_to_json(state: State) -> dict[str, Any]:
    """A canonical JSON-able form of a state (bytes as base64, sorted keys)."""
    return {
        "topics": {
            name: {
                "last_id": ts.last_id,
                "open_page_bytes": ts.open_page_bytes,
                "pages": [[p.end_id, p.size_bytes, p.closed_ts, p.acked_ts] for p in ts.pages],
                "messages": [_message_json(m) for m in ts.messages],
            }
            for name, ts in sorted(state.topics.items())
        },
        "groups": [[t, g, pos] for (t, g), pos in sorted(state.groups.items())],
    }


def state_digest(state: State) -> str:
    """``sha256:<hex>`` of the canonical JSON of ``state``."""
    text = json.dumps(state_to_json(state), sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode("ascii")).hexdigest()
