"""Storage workload profiles: which queues, how big the bodies and batches, how often each
actor acts, the flush mode and the file size the store is opened with.

Plain data recorded in a trace header (``to_json``/``from_json``), as the other layers'
profiles. ``store_config()`` is the ``StoreConfig`` (as JSON) the store is opened with.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from rmqsim.scenarios.queue.profiles import ProfileError

__all__ = ["STORE_GATE_PROFILES", "STORE_PROFILES", "StoreProfile"]

Span = tuple[int, int]


@dataclass(frozen=True)
class StoreProfile:
    """A storage workload. Every ``*_every_s`` is an inclusive range of whole simulated
    seconds between two actions of that actor, or None for an actor that never acts."""

    name: str
    description: str
    steps: int
    topics: tuple[str, ...] = ("orders", "audit")
    queues_per_topic: int = 2
    flush: str = "sync"
    segment_bytes: int = 8192
    max_body_bytes: int = 2048
    body_bytes: Span = (0, 600)
    batch: Span = (1, 4)
    producers: int = 2
    put_every_s: Span = (1, 2)
    read_every_s: Span = (1, 3)
    #: Largest ``max_count`` a reader asks for.
    read_count_max: int = 8
    flush_every_s: Span | None = (5, 15)
    retain_every_s: Span | None = None
    #: How far behind the clock a retention's cutoff is.
    retain_age_s: Span = (5, 40)
    crash_every_s: Span | None = None
    #: Fraction of crashes followed at once by a second crash (the recovery recovered).
    crash_twice_fraction: float = 0.25
    reopen_every_s: Span | None = None
    #: Fraction of operations sent with an invalid argument (the store answers so).
    invalid_fraction: float = 0.0

    def __post_init__(self) -> None:
        if self.steps < 1 or self.queues_per_topic < 1 or not self.topics:
            raise ProfileError(f"store profile {self.name!r}: steps, topics and queues >= 1")
        if self.flush not in ("sync", "async"):
            raise ProfileError(f"store profile {self.name!r}: flush is sync or async")
        if not 0 <= self.invalid_fraction <= 1 or not 0 <= self.crash_twice_fraction <= 1:
            raise ProfileError(f"store profile {self.name!r}: fractions lie in [0, 1]")
        if self.body_bytes[1] > self.max_body_bytes:
            raise ProfileError(f"store profile {self.name!r}: bodies over max_body_bytes")

    def store_config(self) -> dict[str, Any]:
        return {"flush": self.flush, "segment_bytes": self.segment_bytes,
                "max_body_bytes": self.max_body_bytes}

    def to_json(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v
                for k, v in dataclasses.asdict(self).items()}

    @staticmethod
    def from_json(obj: object) -> StoreProfile:
        if type(obj) is not dict:
            raise ProfileError("a store profile is a JSON object")
        names = {f.name for f in dataclasses.fields(StoreProfile)}
        unknown = sorted(set(obj) - names)
        if unknown:
            raise ProfileError(f"store profile: unknown field(s) {', '.join(unknown)}")
        values: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v
                                  for k, v in obj.items()}
        try:
            return StoreProfile(**values)
        except TypeError as exc:
            raise ProfileError(f"store profile: {exc}") from None


STORE_PROFILES: dict[str, StoreProfile] = {
    p.name: p
    for p in (
        StoreProfile("store", "puts and reads on four queues, sync flush, crashes now and "
                     "then", steps=200, crash_every_s=(30, 60)),
        StoreProfile("store-async", "async flush: flushes, crashes that may lose what no "
                     "flush covered", steps=200, flush="async", flush_every_s=(4, 12),
                     crash_every_s=(10, 30)),
        StoreProfile("store-crashy", "crashes often, half of them twice, small files",
                     steps=160, segment_bytes=4096, crash_every_s=(4, 10),
                     crash_twice_fraction=0.5, reopen_every_s=(15, 40)),
        StoreProfile("store-retention", "retention by age over rolling files, crashes and "
                     "clean reopens", steps=200, segment_bytes=4096, body_bytes=(100, 900),
                     retain_every_s=(8, 20), crash_every_s=(25, 50), reopen_every_s=(30, 60)),
        StoreProfile("store-edge", "invalid arguments, empty bodies, the largest body, "
                     "reads outside every queue", steps=160, body_bytes=(0, 2048),
                     batch=(1, 8), invalid_fraction=0.15, crash_every_s=(20, 40),
                     flush="async", retain_every_s=(20, 40)),
    )
}

#: The storage profiles the gate runs.
STORE_GATE_PROFILES = tuple(STORE_PROFILES)
