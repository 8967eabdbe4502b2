"""Stream workload profiles (docs/STREAM.md): how many channels, producers and consumers,
how often each acts, and the faults: a time-tick source whose ticks reach one channel late,
repeat, or are followed by writes below them; consumers that restart from their checkpoint;
plain consumers that seek; crashes of the whole process; retention underneath.

Plain data, recorded in a trace header (``to_json``/``from_json``) like the other profiles.
``swarm`` profiles are families: ``resolve_stream(profile, seed)`` draws the knobs per seed.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass, field
from typing import Any

from rmqsim.scenarios.queue.profiles import ProfileError

__all__ = ["SEEK_CLASSES", "STREAM_PROFILES", "StreamProfile", "resolve_stream"]

Span = tuple[int, int]


@dataclass(frozen=True)
class StreamProfile:
    """A stream workload. Every ``*_every_s`` is an inclusive range of whole simulated
    seconds between two actions of that actor, or None for an actor that never acts."""

    name: str
    description: str
    #: Operations before the drain (producers, ticks and faults stop; consumers go on until
    #: they have delivered everything up to the last tick, or ``drain_limit_s`` passed).
    steps: int
    channels: int = 2
    producers: int = 2
    #: How many of the producers (the last ones) keep messages whole instead of splitting
    #: them by row, so that multi-row messages (rows straddling a tick) are delivered.
    whole_producers: int = 1
    tt_consumers: int = 1
    plain_consumers: int = 1
    produce_every_s: Span = (1, 3)
    #: Messages per produced pack; rows per Insert or Delete.
    pack_size: Span = (1, 3)
    rows: Span = (1, 3)
    #: Fraction of produced messages that are Deletes.
    delete_fraction: float = 0.2
    #: Fraction of packs that repeat a message (a producer's retry) or give two distinct
    #: Inserts the same message id.
    retry_fraction: float = 0.1
    #: Seconds between two time ticks; each tick is 100 above the last.
    tick_every_s: Span = (2, 4)
    #: How late the delayed channel (the last) gets each tick; None: no channel is late.
    tick_delay_s: int | None = None
    #: Fraction of ticks sent twice.
    repeat_tick_fraction: float = 0.0
    #: Fraction of produced messages written at or below the last tick.
    late_write_fraction: float = 0.0
    ddl_every_s: Span | None = (5, 15)
    consume_every_s: Span = (1, 3)
    #: Seconds between two restarts of a time-tick consumer from its checkpoint.
    restart_every_s: Span | None = None
    #: Seconds between two seeks of a plain consumer to a position it delivered.
    seek_every_s: Span | None = None
    crash_every_s: Span | None = None
    retention_every_s: Span | None = None
    #: Fraction of consumer (re)opens that subscribe at LATEST rather than EARLIEST.
    latest_fraction: float = 0.0
    #: Fraction of seek positions of another class than a consumer's own delivered
    #: position or checkpoint (docs/STREAM.md "Operation cells"): an undelivered id,
    #: another channel's id, the earliest stored id, an id retention removed, an id of
    #: the channel before it was re-created, a channel not consumed, an id never issued
    #: (and a time-tick seek after consume()).
    wild_seek_fraction: float = 0.0
    #: Seconds between two re-creations (destroy, create) of a channel's topic underneath.
    recreate_every_s: Span | None = None
    #: The seek classes the wild positions are drawn from (none: every class); a steered
    #: family (``steered``) gives each seed one.
    focus: tuple[str, ...] = ()
    #: A family whose seed chooses its ``focus`` (``resolve_stream``): the gate's steering.
    steered: bool = False
    config: Any = field(
        default_factory=lambda: {"retention_time_s": -1, "retention_size_bytes": -1}
    )
    drain_limit_s: int = 600
    swarm: bool = False

    def __post_init__(self) -> None:
        for knob in ("channels", "producers", "tt_consumers"):
            if type(getattr(self, knob)) is not int or getattr(self, knob) < 1:
                raise ProfileError(f"{self.name}: {knob} must be an int >= 1")
        for knob in (
            "delete_fraction",
            "retry_fraction",
            "repeat_tick_fraction",
            "late_write_fraction",
            "latest_fraction",
            "wild_seek_fraction",
        ):
            if not 0.0 <= getattr(self, knob) < 1.0:
                raise ProfileError(f"{self.name}: {knob} must be in [0, 1)")
        object.__setattr__(self, "config", dict(self.config))

    @property
    def channel_names(self) -> tuple[str, ...]:
        return tuple(f"ch{index}" for index in range(self.channels))

    def to_json(self) -> dict[str, Any]:
        """Plain JSON data for the trace header."""
        return {
            key: list(value) if isinstance(value, tuple) else value
            for key, value in dataclasses.asdict(self).items()
        }

    @classmethod
    def from_json(cls, obj: Any) -> StreamProfile:
        """The profile a trace header recorded; ``ProfileError`` when it is not one."""
        known = {f.name for f in dataclasses.fields(cls)}
        if not isinstance(obj, dict) or set(obj) - known or "channels" not in obj:
            raise ProfileError("not a stream profile (unknown or missing fields)")
        values: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in obj.items()}
        try:
            return cls(**values)
        except TypeError as exc:
            raise ProfileError(f"bad stream profile: {exc}") from None


_STREAM = StreamProfile(
    name="stream",
    description="Two channels, two producers of multi-row Inserts and Deletes with hash keys "
    "(now and then a retried message or two Inserts sharing an id), DDL broadcasts, a "
    "time-tick source broadcasting increasing ticks, a time-tick consumer that restarts "
    "from its checkpoint and a plain consumer. No crashes.",
    steps=300,
    restart_every_s=(10, 30),
)
_STREAM_CRASHY = dataclasses.replace(
    _STREAM,
    name="stream-crashy",
    description="As stream, with three channels, the last one's ticks arriving late, "
    "repeated ticks, writes below the last tick, the whole process crashing every 15-40 s "
    "(every consumer resumes from its checkpoint) and retention underneath.",
    channels=3,
    tick_delay_s=3,
    repeat_tick_fraction=0.15,
    late_write_fraction=0.1,
    crash_every_s=(15, 40),
    retention_every_s=(5, 10),
    config={"page_size_bytes": 256, "retention_time_s": 20, "retention_size_bytes": -1},
)
_STREAM_SEEK = dataclasses.replace(
    _STREAM,
    name="stream-seek",
    description="As stream, with two plain consumers seeking (inclusive or exclusive) to "
    "positions they delivered, on one or several channels at once, and time-tick consumers "
    "restarting often.",
    tt_consumers=2,
    plain_consumers=2,
    restart_every_s=(5, 15),
    seek_every_s=(3, 8),
)
_STREAM_SWARM = dataclasses.replace(
    _STREAM,
    name="stream-swarm",
    description="A family: per seed, the channel count (1-4), the producer and consumer "
    "counts, the fault knobs (late channel, repeated ticks, late writes, crashes, retention) "
    "and the pace of each actor are drawn; some actors are switched off.",
    swarm=True,
)

_STREAM_ARGS = dataclasses.replace(
    _STREAM,
    name="stream-args",
    description="Every argument class of docs/STREAM.md's operation cells: consumers "
    "subscribing at EARLIEST or LATEST in new or existing groups, plain consumers seeking "
    "to undelivered ids, to another channel's id, to the earliest stored id, to ids "
    "retention removed or from before their channel was re-created, to a channel they do "
    "not consume or an id never issued; time-tick consumers resuming from such positions "
    "or seeking after consume(); channels destroyed and re-created underneath, retention "
    "and crashes.",
    steps=600,
    channels=3,
    tt_consumers=2,
    plain_consumers=2,
    restart_every_s=(5, 15),
    seek_every_s=(3, 8),
    crash_every_s=(25, 60),
    retention_every_s=(6, 12),
    config={"page_size_bytes": 256, "retention_time_s": 20, "retention_size_bytes": -1},
    latest_fraction=0.3,
    wild_seek_fraction=0.4,
    recreate_every_s=(20, 45),
)
_STREAM_STEER = dataclasses.replace(
    _STREAM_ARGS,
    name="stream-steer",
    description="As stream-args, each seed drawing its wild seek positions from one class "
    "(SEEK_CLASSES[seed % their count]) and subscribing at LATEST half the time: where the "
    "gate steers the runs it adds for the operation cells its profiles left empty.",
    latest_fraction=0.5,
    wild_seek_fraction=0.6,
    steered=True,
)

#: The classes of a seek's position that the simulation draws (``focus`` names them).
SEEK_CLASSES = (
    "undelivered", "other-channel", "earliest", "trimmed", "recreated", "unknown-channel",
    "never-issued", "after-consume",
)  # fmt: skip

STREAM_PROFILES: dict[str, StreamProfile] = {
    p.name: p
    for p in (_STREAM, _STREAM_CRASHY, _STREAM_SEEK, _STREAM_SWARM, _STREAM_ARGS, _STREAM_STEER)
}


def _maybe(rng: random.Random, span: Span, chance: float = 0.5) -> Span | None:
    return span if rng.random() < chance else None


def resolve_stream(profile: StreamProfile, seed: int) -> StreamProfile:
    """The concrete profile for ``seed``: ``profile`` itself unless it is a swarm family."""
    if profile.steered:
        focus = SEEK_CLASSES[seed % len(SEEK_CLASSES)]
        return dataclasses.replace(
            profile, name=f"{profile.name}#{seed}", focus=(focus,), steered=False
        )
    if not profile.swarm:
        return profile
    rng = random.Random(f"rmqsim/stream-swarm/{seed}")
    low = rng.randint(1, 3)
    return dataclasses.replace(
        profile,
        name=f"{profile.name}#{seed}",
        channels=rng.randint(1, 4),
        producers=rng.randint(1, 3),
        whole_producers=rng.randint(0, 1),
        tt_consumers=rng.randint(1, 2),
        plain_consumers=rng.randint(0, 2),
        produce_every_s=(low, low + rng.randint(0, 3)),
        pack_size=(1, rng.randint(1, 4)),
        rows=(1, rng.randint(1, 4)),
        retry_fraction=rng.choice([0.0, 0.1, 0.3]),
        tick_every_s=(1, rng.randint(1, 5)),
        tick_delay_s=rng.choice([None, None, 2, 6]),
        repeat_tick_fraction=rng.choice([0.0, 0.2]),
        late_write_fraction=rng.choice([0.0, 0.1]),
        ddl_every_s=_maybe(rng, (3, 12)),
        restart_every_s=_maybe(rng, (5, 20), 0.7),
        seek_every_s=_maybe(rng, (3, 10)),
        crash_every_s=_maybe(rng, (10, 40), 0.4),
        retention_every_s=_maybe(rng, (4, 10), 0.3),
        config={"page_size_bytes": 256, "retention_time_s": 15, "retention_size_bytes": -1},
        swarm=False,
    )
