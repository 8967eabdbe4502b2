"""The values of wire protocol version 1 (docs/PROTOCOL.md) as JSON, both ways.

Both ends use this module: the client (``conformance.wire.client``) encodes requests and
decodes replies, the reference server (``conformance.wire.server``) the other way round.
Decoding is strict, because the other end may be anyone's program: a value of the wrong
shape raises ``WireProtocolError`` naming the field (``reply to produce: ok[1]: expected
an integer, got str``), which the client reports as the anomaly ``protocol-error`` with
the offending line. Payloads travel as standard base64; names and properties as JSON
strings, exactly.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
from collections.abc import Mapping
from typing import Any

from rmqsim.model.api import (
    ConsumerMessage,
    GroupExistsError,
    GroupNotFoundError,
    InvalidArgumentError,
    MQError,
    NotServingError,
    Page,
    ProducerMessage,
    State,
    TopicNotFoundError,
    TopicState,
)

__all__ = [
    "ERROR_KINDS",
    "PROTOCOL_VERSION",
    "QUEUE_OPS",
    "STORE_OPS",
    "UNEXPECTED",
    "UnexpectedError",
    "WireProtocolError",
    "bodies_from_wire",
    "bodies_to_wire",
    "decode_consumed",
    "decode_error",
    "decode_line",
    "decode_offsets",
    "decode_produced",
    "decode_state",
    "encode_consumed",
    "encode_error",
    "encode_line",
    "encode_messages",
    "encode_state",
    "messages_from_wire",
    "read_bytes",
    "read_object",
]

#: The protocol version this rmqsim speaks (``hello``'s ``protocol``).
PROTOCOL_VERSION = 1

#: The queue layer's operations and their arguments, in order (docs/PROTOCOL.md).
QUEUE_OPS: dict[str, tuple[str, ...]] = {
    "create_topic": ("topic",),
    "destroy_topic": ("topic",),
    "create_consumer_group": ("topic", "group"),
    "destroy_consumer_group": ("topic", "group"),
    "exist_consumer_group": ("topic", "group"),
    "produce": ("topic", "messages"),
    "consume": ("topic", "group", "n"),
    "seek": ("topic", "group", "msg_id"),
    "seek_to_latest": ("topic", "group"),
    "get_latest_msg": ("topic",),
    "run_retention": (),
    "snapshot": ("topics", "messages_from"),
    "close": (),
}

#: The storage layer's operations and their arguments, in order (docs/PROTOCOL.md).
STORE_OPS: dict[str, tuple[str, ...]] = {
    "put": ("topic", "queue", "bodies"),
    "get": ("topic", "queue", "offset", "max_count"),
    "offsets": ("topic", "queue"),
    "flush": (),
    "retain": ("cutoff",),
    "close": (),
}
#: The error kinds of SPEC, each with its class.
ERROR_KINDS: dict[str, type[MQError]] = {
    "NotServing": NotServingError,
    "InvalidArgument": InvalidArgumentError,
    "TopicNotFound": TopicNotFoundError,
    "GroupNotFound": GroupNotFoundError,
    "GroupExists": GroupExistsError,
}
#: The kind of any other failure of the implementation (``type`` says which).
UNEXPECTED = "Unexpected"


class WireProtocolError(Exception):
    """A line from the other end breaks the protocol; the message says how, and quotes it."""


# --------------------------------------------------------------------------- lines


def encode_line(obj: Mapping[str, Any]) -> bytes:
    """One protocol line: compact JSON, ASCII only (``\\u`` escapes), ending in ``\\n``."""
    return json.dumps(obj, separators=(",", ":")).encode("ascii") + b"\n"


def decode_line(line: bytes, where: str) -> dict[str, Any]:
    """The JSON object of one line (``where`` says whose), or ``WireProtocolError``: for a
    line that is not UTF-8 (decoded here: ``json.loads`` of bytes would guess UTF-16 or
    UTF-32 from the first bytes), and for one that is not JSON, nested too deeply for the
    parser (``RecursionError``) included."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise WireProtocolError(f"{where}: not UTF-8 ({exc}): {_quote(line)}") from None
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise WireProtocolError(f"{where}: not a JSON line ({exc}): {_quote(line)}") from None
    if type(obj) is not dict:
        raise WireProtocolError(f"{where}: expected a JSON object, got {_quote(line)}")
    return obj


def _quote(line: bytes) -> str:
    text = line.decode("utf-8", "backslashreplace").rstrip("\n")
    return repr(text if len(text) <= 200 else text[:200] + "...")


# --------------------------------------------------------------------------- checked reads


def _int(value: object, where: str) -> int:
    if type(value) is not int:
        raise WireProtocolError(f"{where}: expected an integer, got {type(value).__name__}")
    return value


def _str(value: object, where: str) -> str:
    if type(value) is not str:
        raise WireProtocolError(f"{where}: expected a string, got {type(value).__name__}")
    return value


def _list(value: object, where: str) -> list[Any]:
    if type(value) is not list:
        raise WireProtocolError(f"{where}: expected a list, got {type(value).__name__}")
    return value


def read_object(value: object, where: str, fields: tuple[str, ...]) -> dict[str, Any]:
    """``value`` as a JSON object with exactly ``fields`` (``where`` names it in the error)."""
    if type(value) is not dict:
        raise WireProtocolError(f"{where}: expected an object, got {type(value).__name__}")
    missing = [name for name in fields if name not in value]
    if missing:
        raise WireProtocolError(f"{where}: missing {', '.join(missing)}")
    extra = sorted(set(value).difference(fields))
    if extra:
        raise WireProtocolError(f"{where}: unexpected {', '.join(extra)}")
    return value


def read_bytes(value: object, where: str) -> bytes:
    """``value`` as bytes sent in standard base64."""
    text = _str(value, where)
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        raise WireProtocolError(f"{where}: not standard base64: {text[:80]!r}") from None


def _properties(value: object, where: str) -> dict[str, str]:
    if type(value) is not dict:
        raise WireProtocolError(f"{where}: expected an object, got {type(value).__name__}")
    for key, item in value.items():
        _str(item, f"{where}[{key!r}]")
    return value


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


# --------------------------------------------------------------------------- messages


def encode_messages(messages: object) -> list[dict[str, Any]]:
    """``produce``'s messages as the wire has them. A message that is not a
    ``ProducerMessage`` of bytes and string properties has no wire form: rmqsim's own
    operations never make one."""
    encoded = []
    for message in messages:  # type: ignore[attr-defined]  # checked by the caller
        assert isinstance(message, ProducerMessage) and type(message.payload) is bytes, message
        encoded.append({"payload": _b64(message.payload), "properties": dict(message.properties)})
    return encoded


def messages_from_wire(value: object, where: str) -> list[ProducerMessage]:
    """``produce``'s messages read from a request."""
    return [
        ProducerMessage(
            read_bytes(fields["payload"], f"{where}[{index}].payload"),
            _properties(fields["properties"], f"{where}[{index}].properties"),
        )
        for index, item in enumerate(_list(value, where))
        for fields in (read_object(item, f"{where}[{index}]", ("payload", "properties")),)
    ]


def bodies_to_wire(bodies: object) -> list[str]:
    """A storage layer's bodies (``put``'s, ``get``'s answer) as base64 strings."""
    encoded = []
    for body in bodies:  # type: ignore[attr-defined]  # checked by the caller
        assert type(body) is bytes, body
        encoded.append(_b64(body))
    return encoded


def bodies_from_wire(value: object, where: str) -> list[bytes]:
    """Base64 bodies read from a request or a reply (``null`` is not a body)."""
    return [read_bytes(item, f"{where}[{index}]") for index, item in enumerate(_list(value, where))]


def decode_offsets(value: object, where: str) -> tuple[int, int]:
    """``offsets``' answer: ``[min, max]``."""
    pair = _list(value, where)
    if len(pair) != 2:
        raise WireProtocolError(f"{where}: expected [min, max], got {len(pair)} items")
    return (_int(pair[0], f"{where}[0]"), _int(pair[1], f"{where}[1]"))


def _consumer_message(value: object, where: str) -> ConsumerMessage:
    """A message read from the wire. ``null`` for its payload or properties is what the
    implementation returned (Go's nil slice and map, Java's null): kept as ``None``, which
    the comparison then reports as it reports it in process (never equal to ``b""``)."""
    fields = read_object(value, where, ("id", "payload", "properties"))
    payload, properties = fields["payload"], fields["properties"]
    return ConsumerMessage(
        _int(fields["id"], f"{where}.id"),
        None if payload is None else read_bytes(payload, f"{where}.payload"),  # type: ignore[arg-type]  # as returned
        None if properties is None else _properties(properties, f"{where}.properties"),  # type: ignore[arg-type]  # as returned
    )


def _encode_consumer_message(message: ConsumerMessage) -> dict[str, Any]:
    payload, properties = message.payload, message.properties
    return {
        "id": message.msg_id,
        "payload": None if payload is None else _b64(payload),
        "properties": None if properties is None else dict(properties),
    }


def encode_consumed(messages: list[ConsumerMessage]) -> list[dict[str, Any]]:
    """``consume``'s result as the wire has it."""
    return [_encode_consumer_message(m) for m in messages]


def decode_consumed(value: object, where: str) -> list[ConsumerMessage]:
    """``consume``'s result."""
    return [
        _consumer_message(item, f"{where}[{index}]")
        for index, item in enumerate(_list(value, where))
    ]


def decode_produced(value: object, where: str) -> list[int]:
    """``produce``'s result: the ids."""
    return [_int(item, f"{where}[{index}]") for index, item in enumerate(_list(value, where))]


# --------------------------------------------------------------------------- state

_TOPIC_FIELDS = ("messages", "pages", "open_page_bytes", "last_id")
_PAGE_FIELDS = ("end_id", "size_bytes", "closed_ts", "acked_ts")


def encode_state(state: State) -> dict[str, Any]:
    """``snapshot``'s result as the wire has it (groups as ``[topic, group, position]``)."""
    return {
        "topics": {
            name: {
                "messages": [_encode_consumer_message(m) for m in topic.messages],
                "pages": [
                    {
                        "end_id": page.end_id,
                        "size_bytes": page.size_bytes,
                        "closed_ts": page.closed_ts,
                        "acked_ts": page.acked_ts,
                    }
                    for page in topic.pages
                ],
                "open_page_bytes": topic.open_page_bytes,
                "last_id": topic.last_id,
            }
            for name, topic in state.topics.items()
        },
        "groups": [[topic, group, position] for (topic, group), position in state.groups.items()],
    }


def _page(value: object, where: str) -> Page:
    fields = read_object(value, where, _PAGE_FIELDS)
    acked = fields["acked_ts"]
    return Page(
        _int(fields["end_id"], f"{where}.end_id"),
        _int(fields["size_bytes"], f"{where}.size_bytes"),
        _int(fields["closed_ts"], f"{where}.closed_ts"),
        None if acked is None else _int(acked, f"{where}.acked_ts"),
    )


def _topic_state(value: object, where: str) -> TopicState:
    fields = read_object(value, where, _TOPIC_FIELDS)
    messages = _list(fields["messages"], f"{where}.messages")
    pages = _list(fields["pages"], f"{where}.pages")
    return TopicState(
        tuple(_consumer_message(m, f"{where}.messages[{i}]") for i, m in enumerate(messages)),
        tuple(_page(p, f"{where}.pages[{i}]") for i, p in enumerate(pages)),
        _int(fields["open_page_bytes"], f"{where}.open_page_bytes"),
        _int(fields["last_id"], f"{where}.last_id"),
    )


def _group(value: object, where: str) -> tuple[tuple[str, str], int]:
    triple = _list(value, where)
    if len(triple) != 3:
        raise WireProtocolError(f"{where}: expected [topic, group, position]")
    return (
        (_str(triple[0], f"{where}[0]"), _str(triple[1], f"{where}[1]")),
        _int(triple[2], f"{where}[2]"),
    )


def decode_state(value: object, where: str) -> State:
    """``snapshot``'s result. A topic or group listed twice breaks the protocol."""
    fields = read_object(value, where, ("topics", "groups"))
    topics_json = fields["topics"]
    if type(topics_json) is not dict:
        raise WireProtocolError(f"{where}.topics: expected an object")
    topics = {
        name: _topic_state(topic, f"{where}.topics[{name!r}]")
        for name, topic in topics_json.items()
    }
    pairs = [_group(g, f"{where}.groups[{i}]") for i, g in enumerate(_list(fields["groups"], ""))]
    groups = dict(pairs)
    if len(groups) != len(pairs):
        raise WireProtocolError(f"{where}.groups: a (topic, group) is listed twice")
    return State.build(topics, groups)


# --------------------------------------------------------------------------- errors


def encode_error(
    exc: BaseException, kinds: Mapping[str, type[MQError]] = ERROR_KINDS
) -> dict[str, str]:
    """A reply's ``error``: an ``MQError``'s kind (of the layer's ``kinds``), or
    ``Unexpected`` with the type."""
    message = _message(exc)
    if isinstance(exc, MQError):
        for kind, cls in kinds.items():
            if isinstance(exc, cls):
                return {"kind": kind, "message": message}
    return {"kind": UNEXPECTED, "type": type(exc).__name__, "message": message}


def _message(exc: BaseException) -> str:
    try:
        return str(exc)[:1000]
    except Exception:  # an exception whose __str__ raises: say so, do not fail the reply
        return f"<{type(exc).__name__} whose message could not be rendered>"


class UnexpectedError(Exception):
    """A failure the implementation reported as ``Unexpected``: recorded as the outcome
    ``unexpected:<its type>: <message>``, which the model never gives."""


@functools.lru_cache(maxsize=256)
def _unexpected_class(name: str) -> type[UnexpectedError]:
    """A subclass of ``UnexpectedError`` named as the implementation named its error, so
    that the outcome reads ``unexpected:<that name>: ...`` as in process."""
    return type(name, (UnexpectedError,), {"__module__": __name__})


def decode_error(
    value: object, where: str, kinds: Mapping[str, type[MQError]] = ERROR_KINDS
) -> Exception:
    """The exception a reply's ``error`` stands for (a kind of the layer's ``kinds``)."""
    if type(value) is not dict or type(value.get("kind")) is not str:
        raise WireProtocolError(f'{where}: expected {{"kind": ..., "message": ...}}')
    kind = value["kind"]
    message = value.get("message", "")
    message = message if type(message) is str else repr(message)
    if kind in kinds:
        return kinds[kind](message)
    if kind == UNEXPECTED:
        type_name = value.get("type")
        printable = type(type_name) is str and type_name.isprintable() and " " not in type_name
        name = type_name[:80] if printable and type_name else "Unexpected"
        return _unexpected_class(name)(message)
    raise WireProtocolError(
        f"{where}.kind: {kind!r} is none of {', '.join([*kinds, UNEXPECTED])}"
    )
