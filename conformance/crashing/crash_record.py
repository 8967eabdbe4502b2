"""Crash information as typed values: what a step's crash did, and a crash armed at a point.

Two shapes travel through a run, its trace and its replay:

- ``CrashRecord``: a crash injected inside one step (its ``"crash"`` field in a trace step
  line): the crash ``point`` passed, its ``hit`` (1-based count of that point within the
  operation) and how the recovered state ``resolved``: ``before`` the operation (it did not
  happen) or ``after`` it.
- ``ArmedCrash``: a crash to inject, by point (``None``: any point) and hit; a crash sweep's
  header records the one armed in the first open as ``"open_crash"``.

Their JSON forms are plain objects whose keys the trace writer sorts, so a trace holds the
same bytes as when these were dicts. ``from_json`` validates input read from a trace and
raises ``CrashRecordError`` (a ``ValueError``) saying what is wrong.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, cast

__all__ = [
    "CRASH_RECORD_FIELDS",
    "RESOLUTIONS",
    "ArmedCrash",
    "CrashRecord",
    "CrashRecordError",
    "Resolution",
]

#: How a crash inside an operation resolved: the state is the one before it, or after it.
Resolution = Literal["before", "after"]
#: Every ``Resolution``, in the order messages name them.
RESOLUTIONS: tuple[Resolution, ...] = ("before", "after")
#: The keys of a crash record's JSON form.
CRASH_RECORD_FIELDS = frozenset({"point", "hit", "resolved"})


class CrashRecordError(ValueError):
    """A crash record or armed crash read from a trace is malformed (the message says how)."""


@dataclass(frozen=True, slots=True)
class CrashRecord:
    """A crash injected inside one step: where it fired and how its state resolved."""

    point: str
    hit: int
    resolved: Resolution

    def __post_init__(self) -> None:
        assert self.resolved in RESOLUTIONS, self.resolved

    @property
    def undid_operation(self) -> bool:
        """Whether the operation did not happen (the state is the one before it)."""
        return self.resolved == "before"

    def to_json(self) -> dict[str, Any]:
        return {"point": self.point, "hit": self.hit, "resolved": self.resolved}

    @classmethod
    def from_json(cls, obj: Any) -> CrashRecord:
        """The record ``obj`` (a step line's ``"crash"``) holds; ``CrashRecordError``."""
        if not isinstance(obj, dict):
            raise CrashRecordError("'crash' must be an object")
        if set(obj) != CRASH_RECORD_FIELDS:
            raise CrashRecordError("crash must hold exactly point, hit and resolved")
        point, hit, resolved = obj["point"], obj["hit"], obj["resolved"]
        if type(point) is not str or type(hit) is not int:
            raise CrashRecordError("crash point must be a string and hit an integer")
        if resolved not in RESOLUTIONS:
            raise CrashRecordError(
                f"crash resolved must be 'before' or 'after', got {resolved!r:.80}"
            )
        return cls(point, hit, cast(Resolution, resolved))


@dataclass(frozen=True, slots=True)
class ArmedCrash:
    """A crash to inject at the ``hit``-th pass of ``point`` (``None``: of any point)."""

    point: str | None
    hit: int

    def to_json(self) -> dict[str, Any]:
        return {"point": self.point, "hit": self.hit}

    @classmethod
    def from_json(cls, obj: Any) -> ArmedCrash:
        """The armed crash ``obj`` (a header's ``"open_crash"``) holds; ``CrashRecordError``."""
        if not isinstance(obj, dict):
            raise CrashRecordError("an armed crash must be an object {point, hit}")
        point, hit = obj.get("point"), obj.get("hit")
        if not isinstance(point, str | None) or type(hit) is not int:
            raise CrashRecordError("an armed crash must be {point, hit}")
        return cls(point, hit)

    def as_tuple(self) -> tuple[str | None, int]:
        """The ``(point, hit)`` a ``FaultInjector`` is armed with."""
        return (self.point, self.hit)
