"""Deliberately wrong implementations: the harness must catch every one of them.

Each mutant is one bug, written as a small subclass or patch of a real implementation, with a
docstring naming its bug class. A mutant is run exactly like a user's implementation, through
``--impl MOD:FACTORY``, so that catching it exercises the same path a real bug would take.
Modules of this package each export ``MUTANTS: tuple[Mutant, ...]``; the catalogue gathers them.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Mutant"]


@dataclass(frozen=True, slots=True)
class Mutant:
    """One seeded bug: its name, its class of bug, and how to load it."""

    #: Unique, kebab-case (``two-step-produce``).
    name: str
    #: The family it belongs to (``crash-consistency``, ``milvus``, ``ordering``, ...).
    bug_class: str
    #: One line: what is wrong.
    summary: str
    #: ``MOD:FACTORY`` of the wrong implementation, as given to ``--impl``.
    impl: str
    #: Which layer the bug is in: ``"queue"`` (RocksMQ), ``"consumer"`` (the push consumer)
    #: ``"storage"`` (a file-system backend's durability: only a power cut shows it) or
    #: ``"stream"`` (the message streams of docs/STREAM.md) or ``"store"`` (the storage
    #: layer's contract, docs/STORAGE.md: its profiles, then its power-loss sweep).
    layer: str = "queue"
    #: ``process``: the gate runs it in a child process through the wire protocol
    #: (``rmqsim mutants --crash-mode process``), crashed by SIGKILL.
    crash_mode: str = "inprocess"
    #: The deviation profile (``--expect``) of the real system the bug is seeded in: its
    #: listed deviations are not a kill (the unmodified system shows them too).
    expect: str | None = None

    def __post_init__(self) -> None:
        assert self.name and self.name == self.name.lower() and " " not in self.name, self.name
        assert ":" in self.impl, f"{self.name}: impl must be MOD:FACTORY, not {self.impl!r}"
        assert self.layer in ("queue", "consumer", "storage", "stream", "store"), self.layer
