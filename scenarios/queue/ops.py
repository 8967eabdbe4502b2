"""The operation vocabulary: one set of plain-data operations and outcomes for every tool.

The lockstep runner, the fuzzer, the trace files, the shrinker and the reports all speak this
vocabulary, so it is deliberately small, frozen and canonical:

* every operation is a frozen, slotted dataclass with a class-level ``kind`` string (the name
  used in traces); message properties are a *sorted tuple of pairs*, so equal operations are
  equal and hashable whatever order the properties were built in;
* an ``Outcome`` is what an operation returned: a plain value or an error kind name from SPEC;
* the JSON codec (``scenarios.codec``, shared with the other vocabularies) is total on valid
  values and strict on input: an unknown kind, a missing or extra field, a wrong type
  (``bool`` is not ``int``) or bad base64 raises ``OpDecodeError`` naming the field. Nothing
  is ever unpickled or evaluated, because traces come from disk and may be hand-edited or
  corrupted.

This module imports nothing from ``model``/``impl``/``conformance``: the runner adapts these
values to the queue API, which keeps the simulations usable against any queue.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from rmqsim.scenarios.codec import (
    Field,
    OpCodec,
    OpDecodeError,
    OpEncodeError,
    decode_int,
    decode_str,
    exact_fields,
    outcome_fields,
)

__all__ = [
    "ERROR_KINDS",
    "OP_KINDS",
    "OP_TYPES",
    "STATE_CHANGING",
    "AdvanceClock",
    "ArmCrash",
    "CloseReopen",
    "Consume",
    "CrashReopen",
    "CreateGroup",
    "CreateTopic",
    "Delivered",
    "DestroyGroup",
    "DestroyTopic",
    "ExistGroup",
    "GetLatest",
    "Message",
    "Op",
    "OpDecodeError",
    "OpEncodeError",
    "OpT",
    "Outcome",
    "Produce",
    "Properties",
    "RunRetention",
    "Seek",
    "SeekToLatest",
    "Step",
    "op_from_json",
    "op_to_json",
    "outcome_from_json",
    "outcome_to_json",
    "properties_of",
    "step_from_json",
    "step_to_json",
]

#: Message properties in canonical form: (key, value) pairs sorted by key, keys unique.
Properties = tuple[tuple[str, str], ...]

#: The error kinds of SPEC "Errors", in SPEC order.
ERROR_KINDS: tuple[str, ...] = (
    "NotServing",
    "InvalidArgument",
    "TopicNotFound",
    "GroupNotFound",
    "GroupExists",
)


def properties_of(mapping: dict[str, str]) -> Properties:
    """Canonical properties from a dict: pairs sorted by key (keys of a dict are unique)."""
    return tuple(sorted(mapping.items()))


def _properties_are_canonical(properties: object) -> bool:
    """True when ``properties`` is a tuple of (str, str) pairs with strictly increasing keys."""
    if type(properties) is not tuple:
        return False
    previous: str | None = None
    for pair in properties:
        if type(pair) is not tuple or len(pair) != 2:
            return False
        key, value = pair
        if type(key) is not str or type(value) is not str:
            return False
        if previous is not None and key <= previous:
            return False
        previous = key
    return True


# --------------------------------------------------------------------------- values


@dataclass(frozen=True, slots=True)
class Message:
    """A message to produce. ``properties`` must be canonical (see ``properties_of``)."""

    payload: bytes
    properties: Properties = ()

    def __post_init__(self) -> None:
        assert type(self.payload) is bytes, "Message.payload must be bytes"
        assert _properties_are_canonical(self.properties), (
            "Message.properties must be a tuple of (str, str) pairs sorted by unique key"
        )


@dataclass(frozen=True, slots=True)
class Delivered:
    """A message as ``consume`` returned it: id, payload and canonical properties."""

    msg_id: int
    payload: bytes
    properties: Properties = ()


# --------------------------------------------------------------------------- operations


@dataclass(frozen=True, slots=True)
class CreateTopic:
    """``create_topic(topic)``: idempotent."""

    kind: ClassVar[str] = "create_topic"
    topic: str


@dataclass(frozen=True, slots=True)
class DestroyTopic:
    """``destroy_topic(topic)``: removes the topic, its messages and its groups."""

    kind: ClassVar[str] = "destroy_topic"
    topic: str


@dataclass(frozen=True, slots=True)
class CreateGroup:
    """``create_consumer_group(topic, group)``."""

    kind: ClassVar[str] = "create_group"
    topic: str
    group: str


@dataclass(frozen=True, slots=True)
class DestroyGroup:
    """``destroy_consumer_group(topic, group)``: an absent group is not an error."""

    kind: ClassVar[str] = "destroy_group"
    topic: str
    group: str


@dataclass(frozen=True, slots=True)
class ExistGroup:
    """``exist_consumer_group(topic, group) -> bool``."""

    kind: ClassVar[str] = "exist_group"
    topic: str
    group: str


@dataclass(frozen=True, slots=True)
class Produce:
    """``produce(topic, messages) -> ids``; an empty batch is allowed."""

    kind: ClassVar[str] = "produce"
    topic: str
    messages: tuple[Message, ...]


@dataclass(frozen=True, slots=True)
class Consume:
    """``consume(topic, group, n)``; ``n < 0`` is an invalid-argument operation."""

    kind: ClassVar[str] = "consume"
    topic: str
    group: str
    n: int


@dataclass(frozen=True, slots=True)
class Seek:
    """``seek(topic, group, msg_id)``; any int, including negative and never-issued ids."""

    kind: ClassVar[str] = "seek"
    topic: str
    group: str
    msg_id: int


@dataclass(frozen=True, slots=True)
class SeekToLatest:
    """``seek_to_latest(topic, group)``."""

    kind: ClassVar[str] = "seek_to_latest"
    topic: str
    group: str


@dataclass(frozen=True, slots=True)
class GetLatest:
    """``get_latest_msg(topic) -> int``."""

    kind: ClassVar[str] = "get_latest"
    topic: str


@dataclass(frozen=True, slots=True)
class AdvanceClock:
    """A clock jump: adds ``seconds`` (may be negative) to the skew over simulated time.

    The queue is not called; the jump shows in the ``time_s`` of every later ``Step``.
    """

    kind: ClassVar[str] = "advance_clock"
    seconds: int


@dataclass(frozen=True, slots=True)
class RunRetention:
    """``run_retention()`` at the current clock."""

    kind: ClassVar[str] = "run_retention"


@dataclass(frozen=True, slots=True)
class CrashReopen:
    """Crash the queue between operations (no further writes) and reopen the same path."""

    kind: ClassVar[str] = "crash_reopen"


@dataclass(frozen=True, slots=True)
class CloseReopen:
    """Close the queue cleanly and reopen the same path."""

    kind: ClassVar[str] = "close_reopen"


@dataclass(frozen=True, slots=True)
class ArmCrash:
    """Crash at the ``hit``-th (1-based) fault-hook call of the next operation.

    ``point`` restricts the count to calls at that named fault point; None counts every
    point. The runner interprets it; if the next operation makes fewer calls, nothing crashes.
    """

    kind: ClassVar[str] = "arm_crash"
    hit: int
    point: str | None = None


Op = (
    CreateTopic
    | DestroyTopic
    | CreateGroup
    | DestroyGroup
    | ExistGroup
    | Produce
    | Consume
    | Seek
    | SeekToLatest
    | GetLatest
    | AdvanceClock
    | RunRetention
    | CrashReopen
    | CloseReopen
    | ArmCrash
)

#: Operation classes by kind, in the vocabulary's canonical order.
OP_TYPES: dict[str, type[Op]] = {
    cls.kind: cls
    for cls in (
        CreateTopic,
        DestroyTopic,
        CreateGroup,
        DestroyGroup,
        ExistGroup,
        Produce,
        Consume,
        Seek,
        SeekToLatest,
        GetLatest,
        AdvanceClock,
        RunRetention,
        CrashReopen,
        CloseReopen,
        ArmCrash,
    )
}

#: Every operation kind, in canonical order (the order reports list them in).
OP_KINDS: tuple[str, ...] = tuple(OP_TYPES)

#: Kinds that can change the queue's state. The others only read it (exist_group,
#: get_latest), touch only the harness's clock (advance_clock) or arm a crash for the next
#: operation without doing anything themselves (arm_crash).
STATE_CHANGING: frozenset[str] = frozenset(OP_KINDS) - {
    "exist_group",
    "get_latest",
    "advance_clock",
    "arm_crash",
}

assert len(OP_KINDS) == 15


def _same_types(a: object, b: object) -> bool:
    """True when two ``==``-equal outcome values also agree on every type.

    Python's ``==`` says ``True == 1 == 1.0`` and ``b"a" == bytearray(b"a")``; a queue that
    returns a bool or float id, or a bytearray payload, is not conformant, so ``Outcome``
    equality checks the types too (only after ``==`` held, so the common case stays cheap).
    """
    if type(a) is not type(b):
        return False
    if type(a) is not tuple or type(b) is not tuple:  # b has a's type: this only narrows it
        return True
    for x, y in zip(a, b, strict=True):
        if type(x) is not type(y):
            return False
        if type(x) is Delivered and (
            type(x.msg_id) is not type(y.msg_id) or type(x.payload) is not type(y.payload)
        ):
            return False
    return True


@dataclass(frozen=True, slots=True, eq=False)
class Outcome:
    """What an operation returned: a plain ``value`` or the ``error`` kind it raised.

    ``value`` is None, a bool (exist_group), an int (get_latest), a tuple of ints (produce
    ids) or a tuple of ``Delivered`` (consume). ``error`` is one of ``ERROR_KINDS`` for an
    error SPEC defines; any other non-empty string is how a runner describes an exception
    outside SPEC (e.g. ``"unexpected:KeyError: ..."``), kept so it can be compared and traced.
    An error carries no value.

    Equality is type-strict (see ``_same_types``): ``Outcome(True) != Outcome(1)``.
    """

    value: object = None
    error: str | None = None

    def __post_init__(self) -> None:
        assert self.error is None or (
            type(self.error) is str and self.error and self.value is None
        ), f"Outcome.error must be a non-empty str with value None, got {self!r:.300}"

    def __eq__(self, other: object) -> bool:
        if type(other) is not Outcome:
            return NotImplemented
        return (
            self.error == other.error
            and self.value == other.value
            and _same_types(self.value, other.value)
        )

    def __hash__(self) -> int:
        # Consistent with __eq__: strictly-equal outcomes are ==-equal, so they hash alike.
        return hash((self.value, self.error))

    @property
    def ok(self) -> bool:
        """True when the operation returned instead of raising."""
        return self.error is None


#: What a ``Step`` carries: an ``Op`` of this vocabulary (a bare ``Step`` is a
#: ``Step[Op]``), or a consumer simulation's operation (``Step[ConsumerOp]``, see
#: ``scenarios.consumer.ops``), which shares the step's shape.
if TYPE_CHECKING:  # a TypeVar's default (PEP 696) is typing's from Python 3.13
    from typing_extensions import TypeVar as DefaultingTypeVar

    OpT = DefaultingTypeVar("OpT", covariant=True, default=Op)
else:
    OpT = TypeVar("OpT", covariant=True)


@dataclass(frozen=True, slots=True)
class Step(Generic[OpT]):
    """One operation of a simulation: the SUT clock at that moment, who issued it, and what.

    ``time_s`` is simulated time plus the accumulated clock skew, in integer seconds; the
    runner sets the queue's clock to it before applying ``op``. ``Step[Op]`` is a step of
    the queue simulations (the JSON codec below), ``Step[ConsumerOp]`` one of the consumer
    simulation.
    """

    time_s: int
    actor: str
    op: OpT


# --------------------------------------------------------------------------- JSON encoding


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _encode_messages(messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    return [
        {"payload": _b64(message.payload), "properties": dict(message.properties)}
        for message in messages
    ]


def op_to_json(op: Op) -> dict[str, Any]:
    """Encode ``op`` as a JSON-ready dict ``{"kind": ..., <fields>...}``.

    Payloads become standard base64 strings; properties become objects whose keys are in
    sorted order (they are stored sorted).
    """
    return _CODEC.to_json(op)


def _encode_value(value: object) -> Any:
    if value is None or type(value) in (bool, int):
        return value
    if type(value) is tuple:
        if all(type(item) is int for item in value):
            return list(value)
        if all(type(item) is Delivered for item in value):
            return [
                {
                    "msg_id": item.msg_id,
                    "payload": _b64(item.payload),
                    "properties": dict(item.properties),
                }
                for item in value
            ]
    raise OpEncodeError(
        "Outcome.value must be None, bool, int, tuple[int, ...] or tuple[Delivered, ...], "
        f"got {type(value).__name__}: {value!r:.200}"
    )


def outcome_to_json(outcome: Outcome) -> dict[str, Any]:
    """Encode ``outcome`` as ``{"value": ..., "error": ...}`` (both keys always present)."""
    if type(outcome) is not Outcome:
        raise OpEncodeError(f"not an Outcome: {type(outcome).__name__}")
    return {"value": _encode_value(outcome.value), "error": outcome.error}


def step_to_json(step: Step[Op]) -> dict[str, Any]:
    """Encode ``step`` as ``{"time_s": ..., "actor": ..., "op": {...}}``."""
    return {"time_s": step.time_s, "actor": step.actor, "op": op_to_json(step.op)}


# --------------------------------------------------------------------------- JSON decoding


def _bytes(value: object, where: str) -> bytes:
    text = decode_str(value, where)
    try:
        data = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError) as exc:
        raise OpDecodeError(f"{where}: not standard base64: {exc}") from None
    if _b64(data) != text:  # e.g. stray bits in the last character: two texts, one value
        raise OpDecodeError(f"{where}: not canonical base64 (re-encodes differently)")
    return data


def _properties(value: object, where: str) -> Properties:
    if type(value) is not dict:
        raise OpDecodeError(f"{where}: expected an object of strings, got {type(value).__name__}")
    for key, item in value.items():
        if type(key) is not str:  # impossible from json.loads, possible from a Python caller
            raise OpDecodeError(f"{where}: keys must be strings, got {type(key).__name__}")
        if type(item) is not str:
            raise OpDecodeError(f"{where}[{key!r}]: expected a string, got {type(item).__name__}")
    return tuple(sorted(value.items()))


def _message(obj: object, where: str) -> Message:
    fields = exact_fields(obj, where, ("payload", "properties"))
    return Message(
        payload=_bytes(fields["payload"], f"{where}.payload"),
        properties=_properties(fields["properties"], f"{where}.properties"),
    )


def _messages(value: object, where: str) -> tuple[Message, ...]:
    if type(value) is not list:
        raise OpDecodeError(f"{where}: expected a list, got {type(value).__name__}")
    return tuple(_message(item, f"{where}[{index}]") for index, item in enumerate(value))


def _optional_str(value: object, where: str) -> str | None:
    return None if value is None else decode_str(value, where)


def _positive_int(value: object, where: str) -> int:
    number = decode_int(value, where)
    if number < 1:
        raise OpDecodeError(f"{where}: expected an integer >= 1, got {number}")
    return number


#: The codec of the operations: each field by name (payloads in base64, the rest as is).
_CODEC: OpCodec[Op] = OpCodec(
    "operation kind",
    OP_TYPES,
    {
        "topic": Field(decode_str),
        "group": Field(decode_str),
        "messages": Field(_messages, _encode_messages),
        "n": Field(decode_int),
        "msg_id": Field(decode_int),
        "seconds": Field(decode_int),
        "hit": Field(_positive_int),
        "point": Field(_optional_str),
    },
)


def op_from_json(obj: object) -> Op:
    """Decode one operation from the JSON shape of ``op_to_json``; strict (see module doc)."""
    return _CODEC.from_json(obj)


def _delivered(obj: object, where: str) -> Delivered:
    fields = exact_fields(obj, where, ("msg_id", "payload", "properties"))
    return Delivered(
        msg_id=decode_int(fields["msg_id"], f"{where}.msg_id"),
        payload=_bytes(fields["payload"], f"{where}.payload"),
        properties=_properties(fields["properties"], f"{where}.properties"),
    )


def _decode_value(value: object, where: str) -> object:
    if value is None or type(value) in (bool, int):
        return value
    if type(value) is list:
        if all(type(item) is int for item in value):
            return tuple(value)
        if all(type(item) is dict for item in value):
            return tuple(_delivered(item, f"{where}[{index}]") for index, item in enumerate(value))
        raise OpDecodeError(
            f"{where}: a list must hold only integers (ids) or only objects (messages)"
        )
    raise OpDecodeError(
        f"{where}: expected null, a boolean, an integer or a list, got {type(value).__name__}"
    )


def outcome_from_json(obj: object) -> Outcome:
    """Decode an outcome from the JSON shape of ``outcome_to_json``; strict."""
    value, error = outcome_fields(
        obj,
        _decode_value,
        f"an error kind (one of {ERROR_KINDS}, or a runner's description of an exception "
        "outside SPEC)",
    )
    return Outcome(value=value, error=error)


def step_from_json(obj: object) -> Step[Op]:
    """Decode a step from the JSON shape of ``step_to_json``; strict."""
    fields = exact_fields(obj, "step", ("time_s", "actor", "op"))
    return Step(
        time_s=decode_int(fields["time_s"], "step.time_s"),
        actor=decode_str(fields["actor"], "step.actor"),
        op=op_from_json(fields["op"]),
    )
