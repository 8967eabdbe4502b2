"""Name rules and name pools for the actors.

The SPEC's name rule (a non-empty ``str`` of at most 4096 UTF-8 bytes, no ``/``, no NUL) is
restated here rather than imported from ``model.api``: ``scenarios`` is a leaf package and
only needs the rule to *classify* the names it generates (valid pool versus invalid pool).
The queue under test and the model each enforce it on their own; a disagreement between this
copy and theirs shows up as a pool-validation error in ``profiles`` or as a divergence, never
as a silent change of meaning.

The pools are built to hit the places where real implementations go wrong:

* names that are prefixes or suffixes of each other (``t``, ``t1``, ``t10``, ``at``), because
  key layouts like ``topic + suffix`` or ``strings.Contains`` confuse them (SPEC [Milvus]);
* topic/group pairs whose concatenations collide (``t`` + ``10`` versus ``t1`` + ``0``);
* names of exactly ``NAME_MAX_BYTES`` UTF-8 bytes made of 1-, 2-, 3- and 4-byte characters,
  and names one byte over, including one whose *character* count is within the limit but
  whose byte count is not (catches a ``len(name)`` check);
* a lone surrogate, which cannot be encoded as UTF-8 at all (InvalidArgument);
* names that differ only by case (``t``, ``T``) or only by Unicode normalization (``ü`` as
  U+00FC, NFC, and as ``u`` + U+0308, NFD): SPEC compares names as exact strings, so each
  pair is two names, while a queue that case-folds or normalizes names in its keys takes
  them for one (``CASE_PAIRS``, ``NORMALIZATION_PAIRS``; mutants
  ``case-insensitive-names`` and ``nfc-insensitive-names``).
"""

from __future__ import annotations

import unicodedata

__all__ = [
    "AT_LIMIT_NAMES",
    "CASE_PAIRS",
    "DEFAULT_GROUP_NAMES",
    "DEFAULT_INVALID_NAMES",
    "DEFAULT_TOPIC_NAMES",
    "MISSING_NAME",
    "NAME_MAX_BYTES",
    "NORMALIZATION_PAIRS",
    "OVER_LIMIT_NAMES",
    "PROPERTY_KEYS",
    "PROPERTY_VALUES",
    "is_valid_name",
    "name_size_bytes",
]

#: Longest valid topic or group name, in UTF-8 bytes (SPEC "Names and values").
NAME_MAX_BYTES = 4096


def name_size_bytes(name: str) -> int | None:
    """UTF-8 size of ``name`` in bytes, or None when it cannot be encoded (lone surrogate)."""
    try:
        return len(name.encode("utf-8"))
    except UnicodeEncodeError:
        return None


def is_valid_name(name: object) -> bool:
    """True when SPEC accepts ``name`` as a topic or group name."""
    if type(name) is not str or not name or "/" in name or "\0" in name:
        return False
    size = name_size_bytes(name)
    return size is not None and size <= NAME_MAX_BYTES


# Valid names of exactly NAME_MAX_BYTES bytes, and their near relatives.
AT_LIMIT_NAMES: tuple[str, ...] = (
    "x" * NAME_MAX_BYTES,  # 1-byte characters
    "x" * (NAME_MAX_BYTES - 1),  # a prefix of the previous one, one byte shorter
    "x" * (NAME_MAX_BYTES - 2) + "é",  # ends in a 2-byte character, exactly at the limit
    "é" * (NAME_MAX_BYTES // 2),  # 2-byte characters
    "€" * ((NAME_MAX_BYTES - 1) // 3) + "a",  # 3-byte characters plus one ASCII byte
    "😀" * (NAME_MAX_BYTES // 4),  # 4-byte characters
)

# Names exactly one byte over the limit: InvalidArgument.
OVER_LIMIT_NAMES: tuple[str, ...] = (
    "x" * (NAME_MAX_BYTES + 1),
    "x" * (NAME_MAX_BYTES - 1) + "é",  # 4096 characters but 4097 bytes: catches len(str) checks
    "é" * (NAME_MAX_BYTES // 2) + "a",
    "€" * ((NAME_MAX_BYTES - 1) // 3) + "ab",
    "😀" * (NAME_MAX_BYTES // 4) + "a",
)

#: Valid names that differ only by case: two names (SPEC), one to a case-folding queue.
CASE_PAIRS: tuple[tuple[str, str], ...] = (("t", "T"), ("g", "G"))
#: Valid names that differ only by Unicode normalization, NFC (U+00FC) then NFD (``u`` +
#: U+0308, combining diaeresis): two names (SPEC), one to a normalizing queue.
NORMALIZATION_PAIRS: tuple[tuple[str, str], ...] = (
    ("\u00fc-topic", "u\u0308-topic"),
    ("gr\u00fcppe", "gru\u0308ppe"),
)

#: The short names every profile starts from: prefix/suffix relatives, non-ASCII, and the
#: case and normalization twins of ``t``/``g`` and of the non-ASCII ones.
DEFAULT_TOPIC_NAMES: tuple[str, ...] = (
    "t",
    "t1",
    "t10",
    "at",
    "orders",
    NORMALIZATION_PAIRS[0][0],
    CASE_PAIRS[0][1],
    NORMALIZATION_PAIRS[0][1],
)
DEFAULT_GROUP_NAMES: tuple[str, ...] = (
    "g",
    "g1",
    "g10",
    "ag",
    "0",
    "10",
    NORMALIZATION_PAIRS[1][0],
    CASE_PAIRS[1][1],
    NORMALIZATION_PAIRS[1][1],
)

#: Invalid names for the small fraction of invalid-argument operations.
DEFAULT_INVALID_NAMES: tuple[str, ...] = (
    "",
    "/",
    "t/",
    "/t",
    "t/1",
    "\0",
    "t\0",
    OVER_LIMIT_NAMES[0],
    OVER_LIMIT_NAMES[1],
    "\ud800",  # lone surrogate: not encodable as UTF-8
)

#: A valid name that no pool contains, for operations aimed at a topic that does not exist.
MISSING_NAME = "no-such-name"

#: Property keys and values: empty, ASCII, Cyrillic, CJK, emoji, separators, NUL, newlines.
PROPERTY_KEYS: tuple[str, ...] = (
    "",
    "k",
    "key",
    "ключ",
    "キー",
    "emoji😀",
    "a=b",
    "nul\0key",
    "tab\tkey",
    "K",
)
PROPERTY_VALUES: tuple[str, ...] = (
    "",
    "v",
    "value",
    "значение",
    "値",
    "😀🎉",
    "line\nbreak",
    "nul\0value",
    '{"json": true}',
    "v" * 300,
)

for _name in AT_LIMIT_NAMES:
    assert name_size_bytes(_name) in (NAME_MAX_BYTES, NAME_MAX_BYTES - 1), _name[:8]
    assert is_valid_name(_name)
for _name in OVER_LIMIT_NAMES:
    assert name_size_bytes(_name) == NAME_MAX_BYTES + 1, _name[:8]
    assert not is_valid_name(_name)
for _name in DEFAULT_INVALID_NAMES:
    assert not is_valid_name(_name), repr(_name[:8])
for _name in (*DEFAULT_TOPIC_NAMES, *DEFAULT_GROUP_NAMES, MISSING_NAME):
    assert is_valid_name(_name), _name
del _name
for _first, _second in CASE_PAIRS:
    assert _first != _second and _first.casefold() == _second.casefold(), _first
for _first, _second in NORMALIZATION_PAIRS:
    assert _first != _second and _first == unicodedata.normalize("NFC", _second), _first
    assert _second == unicodedata.normalize("NFD", _first), _first
del _first, _second
