"""The JSON codec every operation vocabulary shares (``ops``, ``consumer_ops``, ``stream_ops``).

An operation is a frozen dataclass with a class-level ``kind`` string; its JSON form is
``{"kind": ..., <field>: <value>, ...}`` with the fields in declaration order. A vocabulary
declares its operation classes and, for each field name, a ``Field`` (how the value is
written, and how it is checked and rebuilt when read back); ``OpCodec`` does the rest.

Decoding is strict, because traces come from disk and may be hand-edited or corrupted: a
value that is not an object, a missing or unknown kind, a missing or extra field or a wrong
value raises ``OpDecodeError`` whose message starts with the place, the operation and the
field (``op(seek).msg_id: expected an integer, got bool``). Nothing is unpickled or evaluated.

*Plain data* (``plain_to_json``/``json_to_plain``) is the JSON form of the consumer and
stream simulations' fields and outcomes: tuples become lists, bytes ``{"b64": ...}``.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = [
    "Field",
    "OpCodec",
    "OpDecodeError",
    "OpEncodeError",
    "decode_int",
    "decode_plain",
    "decode_str",
    "exact_fields",
    "json_to_plain",
    "outcome_fields",
    "plain_field",
    "plain_to_json",
]


class OpDecodeError(ValueError):
    """A JSON value is not a valid operation, outcome or step; the message names the field."""


class OpEncodeError(TypeError):
    """A value cannot be encoded: it is not plain data of this vocabulary."""


# --------------------------------------------------------------------------- checked reads


def exact_fields(obj: object, where: str, expected: tuple[str, ...]) -> dict[str, Any]:
    """``obj`` itself once it is a JSON object with exactly the ``expected`` keys."""
    if type(obj) is not dict:
        raise OpDecodeError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    keys = set(obj)
    missing = [k for k in expected if k not in keys]
    if missing:
        raise OpDecodeError(f"{where}: missing field(s) {', '.join(missing)}")
    extra = sorted(str(k) for k in keys.difference(expected))
    if extra:
        raise OpDecodeError(f"{where}: unexpected field(s) {', '.join(extra)}")
    return obj


def decode_str(value: object, where: str) -> str:
    """``value`` if it is a string."""
    if type(value) is not str:
        raise OpDecodeError(f"{where}: expected a string, got {type(value).__name__}")
    return value


def decode_int(value: object, where: str) -> int:
    """``value`` if it is an integer (a bool is not)."""
    if type(value) is not int:  # rejects bool, whose type is bool, not int
        raise OpDecodeError(f"{where}: expected an integer, got {type(value).__name__}")
    return value


# --------------------------------------------------------------------------- plain data


def plain_to_json(value: Any) -> Any:
    """Plain data as JSON: tuples become lists, bytes ``{"b64": ...}``."""
    if value is None or type(value) in (bool, int, str):
        return value
    if type(value) is bytes:
        return {"b64": base64.b64encode(value).decode("ascii")}
    if type(value) is tuple:
        return [plain_to_json(item) for item in value]
    raise TypeError(f"not plain outcome data: {type(value).__name__}")


def json_to_plain(value: Any) -> Any:
    """The inverse of ``plain_to_json``: lists become tuples, ``{"b64": ...}`` bytes."""
    if value is None or type(value) in (bool, int, str):
        return value
    if type(value) is list:
        return tuple(json_to_plain(item) for item in value)
    if type(value) is dict and set(value) == {"b64"} and type(value["b64"]) is str:
        try:
            return base64.b64decode(value["b64"], validate=True)
        except (binascii.Error, ValueError):
            raise OpDecodeError(f"not valid base64: {value['b64'][:80]!r}") from None
    raise OpDecodeError(f"not plain outcome data: {str(value)[:80]}")


def decode_plain(value: object, where: str, check: Callable[[Any], bool] = lambda _: True) -> Any:
    """``json_to_plain(value)`` if it passes ``check``; errors start with ``where``."""
    try:
        plain = json_to_plain(value)
    except OpDecodeError as exc:
        raise OpDecodeError(f"{where}: {exc}") from None
    if not check(plain):
        raise OpDecodeError(f"{where}: wrong value {str(value)[:80]}")
    return plain


# --------------------------------------------------------------------------- operations


@dataclass(frozen=True, slots=True)
class Field:
    """How an operation field is read and written.

    ``decode(json_value, where)`` checks the JSON value and returns the field's value,
    raising ``OpDecodeError`` whose message starts with ``where`` (``op(kind).name``);
    ``encode(value)`` returns its JSON value, None meaning the value as it is.
    """

    decode: Callable[[Any, str], Any]
    encode: Callable[[Any], Any] | None = None


def plain_field(check: type | Callable[[Any], bool]) -> Field:
    """A field written as plain data, whose decoded value must pass ``check``: a
    predicate, or a type the value must have exactly (``bool`` is not ``int``)."""
    if isinstance(check, type):
        check = functools.partial(_has_type, check)
    return Field(functools.partial(decode_plain, check=check), plain_to_json)


def _has_type(expected: type, value: object) -> bool:
    return type(value) is expected


OpT = TypeVar("OpT", bound="DataclassInstance")


class OpCodec(Generic[OpT]):
    """The strict JSON codec of one vocabulary: ``types`` by kind, a ``Field`` per field
    name, and ``retired`` fields by ``(kind, name)``, each with why it is refused (e.g. a
    field an older rmqsim wrote, whose meaning changed). ``noun`` names an operation in
    the unknown-kind message (``op.kind: unknown <noun> 'x'; known: (...)``)."""

    def __init__(
        self,
        noun: str,
        types: Mapping[str, type[OpT]],
        fields: Mapping[str, Field],
        retired: Mapping[tuple[str, str], str] | None = None,
    ) -> None:
        self.noun = noun
        self.types = dict(types)
        self.retired = dict(retired or {})
        names = {kind: tuple(f.name for f in dataclasses.fields(t)) for kind, t in types.items()}
        missing = sorted({name for kind in names for name in names[kind]}.difference(fields))
        if missing:
            raise ValueError(f"no Field for {missing}")
        #: Each kind's fields in declaration order, and the keys of its JSON form.
        self._fields = {kind: tuple((n, fields[n]) for n in names[kind]) for kind in names}
        self._keys = {kind: ("kind", *names[kind]) for kind in names}

    def to_json(self, op: OpT) -> dict[str, Any]:
        """``{"kind": ..., <fields>...}``; ``OpEncodeError`` for an operation of another
        vocabulary."""
        kind = getattr(type(op), "kind", None)
        if type(kind) is not str or self.types.get(kind) is not type(op):
            raise OpEncodeError(f"not an operation of this vocabulary: {type(op).__name__}")
        obj: dict[str, Any] = {"kind": kind}
        for name, field in self._fields[kind]:
            value = getattr(op, name)
            obj[name] = value if field.encode is None else field.encode(value)
        return obj

    def from_json(self, obj: object) -> OpT:
        """The operation ``obj`` is the JSON form of; strict (see the module's doc)."""
        if type(obj) is not dict:
            raise OpDecodeError(f"op: expected a JSON object, got {type(obj).__name__}")
        if "kind" not in obj:
            raise OpDecodeError("op: missing field(s) kind")
        kind = obj["kind"]
        if type(kind) is not str or kind not in self.types:
            known = tuple(self.types)
            raise OpDecodeError(f"op.kind: unknown {self.noun} {kind!r}; known: {known}")
        where = f"op({kind})"
        for (retired_kind, name), why in self.retired.items():
            if retired_kind == kind and name in obj:
                raise OpDecodeError(f"{where}.{name}: {why}")
        exact_fields(obj, where, self._keys[kind])
        values = {n: field.decode(obj[n], f"{where}.{n}") for n, field in self._fields[kind]}
        return self.types[kind](**values)


# --------------------------------------------------------------------------- outcomes


def outcome_fields(
    obj: object, decode_value: Callable[[object, str], object], error_hint: str
) -> tuple[object, str | None]:
    """The ``(value, error)`` of an outcome's JSON form ``{"value": ..., "error": ...}``:
    ``error`` is null or a non-empty string (``error_hint`` says which), ``value`` is
    ``decode_value(value, "outcome.value")`` and null when ``error`` is set."""
    fields = exact_fields(obj, "outcome", ("value", "error"))
    error = fields["error"]
    if error is not None and (type(error) is not str or not error):
        raise OpDecodeError(f"outcome.error: expected null or {error_hint}, got {error!r:.200}")
    value = decode_value(fields["value"], "outcome.value")
    if error is not None and value is not None:
        raise OpDecodeError("outcome.value: must be null when outcome.error is set")
    return value, error
