"""Consumer workload profiles: who produces, which push consumers run with how many
workers, how slow and how faulty their handlers are, and how often clients or the whole
process crash. Plain data, recorded in the trace header like ``profiles.Profile``."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from rmqsim.scenarios.queue.profiles import ProfileError

__all__ = ["CONSUMER_PROFILES", "ClientSpec", "ConsumerProfile"]

#: ConsumerConfig knobs a client may set (the mode is ``ClientSpec.mode``).
CONSUMER_KNOBS = (
    "pull_batch_size",
    "consume_batch_size",
    "max_cached_count",
    "max_cached_bytes",
    "max_reconsume_times",
    "persist_interval_s",
    "suspend_s",
)


@dataclass(frozen=True)
class ClientSpec:
    """One push consumer: its group, mode, worker count and handler behaviour."""

    group: str
    mode: str = "concurrent"
    workers: int = 2
    #: ConsumerConfig knobs (``CONSUMER_KNOBS``); the others keep their defaults.
    consumer: Any = field(default_factory=dict)
    #: Whole seconds a handler takes, inclusive range.
    process_time_s: tuple[int, int] = (0, 2)
    #: Fraction of batches the handler fails (RETRY_LATER or SUSPEND).
    fail_fraction: float = 0.15
    #: Fraction of send-backs the queue refuses (concurrent mode only).
    send_fail_fraction: float = 0.0
    #: Seconds between two pulls, inclusive range.
    pull_every_s: tuple[int, int] = (1, 2)

    def __post_init__(self) -> None:
        if self.mode not in ("concurrent", "orderly"):
            raise ProfileError(f"client {self.group}: mode must be concurrent or orderly")
        unknown = sorted(set(self.consumer) - set(CONSUMER_KNOBS))
        if unknown:
            raise ProfileError(f"client {self.group}: unknown consumer knobs {unknown}")
        object.__setattr__(self, "consumer", dict(self.consumer))
        if type(self.workers) is not int or self.workers < 1:
            raise ProfileError(f"client {self.group}: workers must be an int >= 1")
        for knob in ("fail_fraction", "send_fail_fraction"):
            if not 0.0 <= getattr(self, knob) < 1.0:
                raise ProfileError(f"client {self.group}: {knob} must be in [0, 1)")

    @property
    def persist_interval_s(self) -> int:
        return int(self.consumer.get("persist_interval_s", 5))


@dataclass(frozen=True)
class ConsumerProfile:
    """A consumer workload (see the module doc). ``swarm`` is always False: ``resolve``
    returns it as it is."""

    name: str
    description: str
    #: Operations before the drain (producers and the crasher stop; consumers go on until
    #: every produced message is finished or ``drain_limit_s`` passed).
    steps: int
    clients: tuple[ClientSpec, ...]
    topic: str = "t"
    #: The queue's config: small pages and short retention, so that retention passes
    #: delete every page the guard groups have passed (and only those) during the run.
    config: Any = field(
        default_factory=lambda: {
            "page_size_bytes": 256,
            "retention_time_s": 2,
            "retention_size_bytes": 512,
        }
    )
    #: Seconds between two retention passes (inclusive range), or None for none.
    retention_every_s: tuple[int, int] | None = (1, 4)
    producers: int = 1
    produce_every_s: tuple[int, int] = (0, 2)
    batch_size: tuple[int, int] = (1, 4)
    payload_size_bytes: tuple[int, int] = (0, 32)
    #: Seconds between two crashes (inclusive range), or None for no crashes.
    crash_every_s: tuple[int, int] | None = None
    #: Fraction of crashes that take the whole process (queue and clients) down.
    queue_crash_fraction: float = 0.0
    drain_limit_s: int = 3000
    swarm: bool = False

    def __post_init__(self) -> None:
        if not self.clients:
            raise ProfileError(f"{self.name}: needs at least one client")
        groups = [c.group for c in self.clients]
        if len(set(groups)) != len(groups):
            raise ProfileError(f"{self.name}: client groups must be unique")
        object.__setattr__(self, "config", dict(self.config))

    def to_json(self) -> dict[str, Any]:
        """Plain JSON data for the trace header."""
        return _plain(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, obj: Any) -> ConsumerProfile:
        """The profile a trace header recorded (``to_json``), so that a trace replays
        with the workload it was made with. ``ProfileError`` when it is not one."""
        if not isinstance(obj, dict) or not isinstance(obj.get("clients"), list):
            raise ProfileError("not a consumer profile: no list of clients")
        known = {f.name for f in dataclasses.fields(cls)}
        client_known = {f.name for f in dataclasses.fields(ClientSpec)}
        clients = obj["clients"]
        if set(obj) - known or any(
            not isinstance(c, dict) or set(c) - client_known for c in clients
        ):
            raise ProfileError("consumer profile or client with unknown fields")
        try:
            specs = tuple(ClientSpec(**_tuples(c)) for c in clients)
            return cls(**{**_tuples(obj), "clients": specs})
        except TypeError as exc:
            raise ProfileError(f"bad consumer profile: {exc}") from None


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def _tuples(value: Any) -> Any:
    """JSON back to profile data: lists become tuples, dicts keep their keys."""
    if isinstance(value, dict):
        return {key: _tuples(item) for key, item in value.items()}
    if isinstance(value, list):
        return tuple(_tuples(item) for item in value)
    return value


_BUSY = ClientSpec(
    group="busy",
    workers=3,
    consumer={"consume_batch_size": 2, "max_reconsume_times": 2, "persist_interval_s": 4},
    process_time_s=(0, 3),
    fail_fraction=0.3,
    send_fail_fraction=0.1,
)
_SLOW = ClientSpec(
    group="slow",
    workers=1,
    consumer={
        "pull_batch_size": 4,
        "max_cached_count": 4,
        "max_cached_bytes": 80,
        "persist_interval_s": 6,
    },
    process_time_s=(1, 3),
    fail_fraction=0.05,
)
_ORDERLY = ClientSpec(
    group="ordered",
    mode="orderly",
    workers=2,
    consumer={"consume_batch_size": 2, "max_reconsume_times": 2, "suspend_s": 2},
    process_time_s=(0, 2),
    fail_fraction=0.15,
)

_CONSUMER = ConsumerProfile(
    name="consumer",
    description="Two push consumers on one topic: a busy pool of three workers whose handler "
    "fails 30 % of the batches and whose send-backs are sometimes refused, and a slow "
    "single worker with a small cache (4 messages, 80 bytes) that keeps hitting flow "
    "control; retention passes every 1-4 s. No crashes.",
    steps=300,
    clients=(_BUSY, _SLOW),
)
_CONSUMER_CRASHY = dataclasses.replace(
    _CONSUMER,
    name="consumer-crashy",
    description="As consumer, with a client killed every 5-15 s and now and then the whole "
    "process (queue and clients): redelivery stays within the un-persisted window and "
    "retention deletes nothing a restarted consumer still needs.",
    crash_every_s=(5, 15),
    queue_crash_fraction=0.25,
)
_CONSUMER_ORDERLY = dataclasses.replace(
    _CONSUMER,
    name="consumer-orderly",
    description="An orderly consumer (in-place retries, suspends, dead letters after two "
    "reconsumes) beside a concurrent pool, with client and process crashes.",
    clients=(_ORDERLY, _BUSY),
    crash_every_s=(5, 20),
    queue_crash_fraction=0.2,
)

CONSUMER_PROFILES: dict[str, ConsumerProfile] = {
    p.name: p for p in (_CONSUMER, _CONSUMER_CRASHY, _CONSUMER_ORDERLY)
}
