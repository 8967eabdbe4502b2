"""Workload profiles: plain-data recipes for a simulation (who acts, how often, on what).

A profile is plain data on purpose: the trace header records ``profile.to_json()`` so a
failure can be replayed and explained without this code's defaults, and ``Profile.from_json``
rebuilds it. Every knob names its unit (``_s``, ``_bytes``) and is validated on construction,
so a bad profile fails when it is built, not halfway through a run.

How the knobs drive the actors (see ``actors``):

* ``actors[role]`` starts that many processes of the role; each wakes after a think time
  drawn uniformly from ``think_time_s[role]`` (integer seconds, inclusive) and emits one
  operation, choosing its kind among ``ROLE_KINDS[role]`` by ``weights`` (a weight of 0
  switches that kind off everywhere; a role whose kinds are all off is not started);
* ``target_topics``/``target_groups_per_topic``: actors that need a topic or group create
  one (``create_topic``/``create_group``, if those kinds are on) while fewer are believed to
  exist, so most queue operations hit something that exists;
* ``missing_fraction`` of queue operations aim at an absent topic or group, and
  ``invalid_fraction`` use an invalid name (or ``n < 0``), so errors are a minority but
  always present.

``swarm`` is a profile *family*: ``resolve(profile, seed)`` turns it into a concrete profile
whose weights and config are drawn per seed, with some kinds switched off (swarm testing:
leaving features out lets the remaining ones reach deeper states).
"""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from rmqsim.scenarios.names import (
    AT_LIMIT_NAMES,
    CASE_PAIRS,
    DEFAULT_GROUP_NAMES,
    DEFAULT_INVALID_NAMES,
    DEFAULT_TOPIC_NAMES,
    NORMALIZATION_PAIRS,
    OVER_LIMIT_NAMES,
    is_valid_name,
)
from rmqsim.scenarios.queue.ops import OP_KINDS

__all__ = [
    "CONFIG_KEYS",
    "PROFILES",
    "ROLES",
    "ROLE_BOOTSTRAP_KINDS",
    "ROLE_KINDS",
    "SEEK_TARGETS",
    "SINGLETON_ROLES",
    "SWARM_BULK_BATCH_SIZE",
    "SWARM_BULK_SHARE",
    "SWARM_POLL_SIZES",
    "Profile",
    "ProfileError",
    "UnknownProfileError",
    "resolve",
]

#: Exactly the keys of ``Profile.config``; the runner turns them into ``MQConfig``.
CONFIG_KEYS: tuple[str, ...] = ("page_size_bytes", "retention_time_s", "retention_size_bytes")

#: Actor roles and the operation kinds each may emit (besides bootstrap creates, see above).
ROLE_KINDS: dict[str, tuple[str, ...]] = {
    "producer": ("produce",),
    "consumer": ("consume",),
    "seeker": ("seek", "seek_to_latest"),
    "group_churn": ("create_group", "destroy_group", "exist_group"),
    "topic_churn": ("create_topic", "destroy_topic"),
    "observer": ("get_latest", "exist_group"),
    "clock": ("advance_clock",),
    "retention": ("run_retention",),
    "crasher": ("crash_reopen", "close_reopen", "arm_crash"),
}
ROLES: tuple[str, ...] = tuple(ROLE_KINDS)
#: Creates a role may emit to bootstrap what it needs (a topic, a group) while fewer than
#: ``target_topics``/``target_groups_per_topic`` are believed to exist, if the kind is on.
ROLE_BOOTSTRAP_KINDS: dict[str, tuple[str, ...]] = {
    "producer": ("create_topic",),
    "consumer": ("create_topic", "create_group"),
    "seeker": ("create_topic", "create_group"),
    "group_churn": ("create_topic",),
    "observer": ("create_topic",),
}
#: Roles with at most one actor, named by the role alone ("clock", "retention", "crasher").
SINGLETON_ROLES: tuple[str, ...] = ("clock", "retention", "crasher")

#: Where seekers aim (weights in ``Profile.seek_targets``):
#: seen - an id between the lowest recently consumed and the highest issued;
#: retained_away - an id below the lowest recently consumed (likely deleted by retention);
#: never_issued - just above the highest id issued; negative - -1, -2 or further down;
#: zero - 0; boundary - ids around 9/10, 99/100, 999/1000, 9999/10000;
#: extreme - around 2**31, 2**63 and 2**64, where fixed-width encodings overflow.
SEEK_TARGETS: tuple[str, ...] = (
    "seen",
    "retained_away",
    "never_issued",
    "negative",
    "zero",
    "boundary",
    "extreme",
)

#: Upper bounds that keep a profile's per-operation cost small (see ``Profile`` checks).
MAX_BATCH_SIZE = 1000
MAX_PAYLOAD_SIZE_BYTES = 1 << 20
MAX_ACTORS_PER_ROLE = 64


class ProfileError(ValueError):
    """A profile (or its JSON form) breaks the rules of ``Profile``."""


class UnknownProfileError(ProfileError):
    """No profile has that name; the message lists the known names."""


def _frozen_map(value: Mapping[str, Any], keys: tuple[str, ...], what: str) -> Mapping[str, Any]:
    """A read-only copy of ``value`` in ``keys`` order; its keys must be exactly ``keys``."""
    if not isinstance(value, Mapping):
        raise ProfileError(f"{what} must be a mapping, got {type(value).__name__}")
    if set(value) != set(keys):
        missing = [k for k in keys if k not in value]
        extra = sorted(str(k) for k in value if k not in keys)
        raise ProfileError(f"{what}: missing keys {missing}, unexpected keys {extra}")
    return MappingProxyType({key: value[key] for key in keys})


def _check_int(value: object, what: str, low: int | None = None, high: int | None = None) -> None:
    if type(value) is not int:
        raise ProfileError(f"{what} must be an int, got {type(value).__name__}")
    if low is not None and value < low:
        raise ProfileError(f"{what} must be >= {low}, got {value}")
    if high is not None and value > high:
        raise ProfileError(f"{what} must be <= {high}, got {value}")


def _check_range(value: object, what: str, low: int, high: int) -> tuple[int, int]:
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise ProfileError(f"{what} must be a pair [low, high], got {value!r}")
    lo, hi = value
    _check_int(lo, f"{what}[0]", low, high)
    _check_int(hi, f"{what}[1]", low, high)
    if lo > hi:
        raise ProfileError(f"{what} must have low <= high, got {value!r}")
    return (lo, hi)


def _check_fraction(value: object, what: str) -> None:
    # An int or a float exactly: not a bool (nor any other subclass of one).
    if (
        not isinstance(value, (int, float))
        or type(value) not in (int, float)
        or not 0.0 <= value <= 1.0
    ):
        raise ProfileError(f"{what} must be a number in [0, 1], got {value!r}")


def _check_pool(value: object, what: str, valid: bool) -> tuple[str, ...]:
    if not isinstance(value, (tuple, list)) or not value:
        raise ProfileError(f"{what} must be a non-empty list of names")
    for name in value:
        if type(name) is not str or is_valid_name(name) is not valid:
            adjective = "valid" if valid else "invalid"
            raise ProfileError(f"{what} must hold only {adjective} names, got {name!r:.60}")
    if len(set(value)) != len(value):
        raise ProfileError(f"{what} must not repeat names")
    return tuple(value)


@dataclass(frozen=True)
class Profile:
    """A workload recipe; see the module doc for how each knob drives the actors."""

    name: str
    description: str
    #: Default operation budget of one run.
    steps: int
    #: ``page_size_bytes``, ``retention_time_s``, ``retention_size_bytes`` (-1 disables).
    config: Mapping[str, int]
    #: Number of actors per role (``ROLES``); singleton roles take 0 or 1.
    actors: Mapping[str, int]
    #: Per role, the inclusive [low, high] range of whole seconds between two operations.
    think_time_s: Mapping[str, tuple[int, int]]
    #: Relative weight of each operation kind within the roles that emit it; 0 = off.
    weights: Mapping[str, int]
    target_topics: int = 2
    target_groups_per_topic: int = 2
    topic_names: tuple[str, ...] = DEFAULT_TOPIC_NAMES
    group_names: tuple[str, ...] = DEFAULT_GROUP_NAMES
    invalid_names: tuple[str, ...] = DEFAULT_INVALID_NAMES
    #: Fraction of operations made invalid (invalid name, or ``n < 0`` for consume).
    invalid_fraction: float = 0.03
    #: Fraction of queue operations aimed at a topic or group believed absent.
    missing_fraction: float = 0.05
    #: Messages per produce call, inclusive range (0 = an empty batch).
    batch_size: tuple[int, int] = (0, 4)
    payload_size_bytes: tuple[int, int] = (0, 64)
    #: Fraction of messages with an empty payload regardless of ``payload_size_bytes``.
    empty_payload_fraction: float = 0.1
    properties_per_message: tuple[int, int] = (0, 3)
    #: ``n`` values consumers draw from (include 0 and something larger than any backlog).
    poll_sizes: tuple[int, ...] = (0, 1, 2, 5, 100)
    #: Weights of the seek target classes of ``SEEK_TARGETS``.
    seek_targets: Mapping[str, int] = field(
        default_factory=lambda: {
            "seen": 6,
            "retained_away": 2,
            "never_issued": 2,
            "negative": 1,
            "zero": 1,
            "boundary": 1,
            "extreme": 1,
        }
    )
    #: Clock jumps (seconds) the clock actor draws from; negative ones move the clock back
    #: (never below 0).
    clock_jumps_s: tuple[int, ...] = (1, 10, 60, 3600)
    #: ``ArmCrash.hit`` is drawn from 1..arm_crash_max_hit.
    arm_crash_max_hit: int = 6
    #: Fault point names ArmCrash may target (half the time); empty = always any point.
    crash_points: tuple[str, ...] = ()
    #: True for a profile family that ``resolve`` must make concrete per seed.
    swarm: bool = False

    def __post_init__(self) -> None:
        """Validate every knob and freeze the mappings, so a bad profile fails at once."""
        set_ = object.__setattr__
        if type(self.name) is not str or not self.name:
            raise ProfileError("Profile.name must be a non-empty string")
        if type(self.description) is not str:
            raise ProfileError(f"{self.name}: description must be a string")
        _check_int(self.steps, f"{self.name}.steps", 0)
        set_(self, "config", _frozen_map(self.config, CONFIG_KEYS, f"{self.name}.config"))
        _check_int(self.config["page_size_bytes"], f"{self.name}.config.page_size_bytes", 1)
        for key in ("retention_time_s", "retention_size_bytes"):
            _check_int(self.config[key], f"{self.name}.config.{key}", -1)
        set_(self, "actors", _frozen_map(self.actors, ROLES, f"{self.name}.actors"))
        for role, count in self.actors.items():
            high = 1 if role in SINGLETON_ROLES else MAX_ACTORS_PER_ROLE
            _check_int(count, f"{self.name}.actors.{role}", 0, high)
        think = _frozen_map(self.think_time_s, ROLES, f"{self.name}.think_time_s")
        set_(
            self,
            "think_time_s",
            MappingProxyType(
                {
                    role: _check_range(span, f"{self.name}.think_time_s.{role}", 0, 10**9)
                    for role, span in think.items()
                }
            ),
        )
        set_(self, "weights", _frozen_map(self.weights, OP_KINDS, f"{self.name}.weights"))
        for kind, weight in self.weights.items():
            _check_int(weight, f"{self.name}.weights.{kind}", 0, 10**6)
        targets = _frozen_map(self.seek_targets, SEEK_TARGETS, f"{self.name}.seek_targets")
        set_(self, "seek_targets", targets)
        for target, weight in targets.items():
            _check_int(weight, f"{self.name}.seek_targets.{target}", 0, 10**6)
        if self.weights["seek"] and not sum(targets.values()):
            raise ProfileError(f"{self.name}: seek is on but every seek target weight is 0")
        _check_int(self.target_topics, f"{self.name}.target_topics", 1)
        _check_int(self.target_groups_per_topic, f"{self.name}.target_groups_per_topic", 1)
        set_(self, "topic_names", _check_pool(self.topic_names, f"{self.name}.topic_names", True))
        set_(self, "group_names", _check_pool(self.group_names, f"{self.name}.group_names", True))
        set_(
            self,
            "invalid_names",
            _check_pool(self.invalid_names, f"{self.name}.invalid_names", False),
        )
        for knob in ("invalid_fraction", "missing_fraction", "empty_payload_fraction"):
            _check_fraction(getattr(self, knob), f"{self.name}.{knob}")
        limits = {
            "batch_size": MAX_BATCH_SIZE,
            "payload_size_bytes": MAX_PAYLOAD_SIZE_BYTES,
            "properties_per_message": 8,
        }
        for knob, high in limits.items():
            set_(self, knob, _check_range(getattr(self, knob), f"{self.name}.{knob}", 0, high))
        for knob in ("poll_sizes", "clock_jumps_s"):
            values = getattr(self, knob)
            if not isinstance(values, (tuple, list)) or not values:
                raise ProfileError(f"{self.name}.{knob} must be a non-empty list of ints")
            for value in values:
                _check_int(value, f"{self.name}.{knob}[]", 0 if knob == "poll_sizes" else None)
            set_(self, knob, tuple(values))
        _check_int(self.arm_crash_max_hit, f"{self.name}.arm_crash_max_hit", 1, 10**6)
        if not isinstance(self.crash_points, (tuple, list)) or not all(
            type(p) is str and p for p in self.crash_points
        ):
            raise ProfileError(f"{self.name}.crash_points must be a list of non-empty strings")
        set_(self, "crash_points", tuple(self.crash_points))
        if type(self.swarm) is not bool:
            raise ProfileError(f"{self.name}.swarm must be a bool")

    def __hash__(self) -> int:
        # The generated hash would hash the mappings and fail; the JSON form is canonical.
        return hash(json.dumps(self.to_json(), sort_keys=True))

    def kind_enabled(self, kind: str) -> bool:
        """True when some started actor can emit ``kind`` (weight > 0 and a role for it).

        A role is started when at least one of its own kinds is on; its bootstrap creates
        come on top of those.
        """
        if not self.weights[kind]:
            return False
        for role, kinds in ROLE_KINDS.items():
            if not self.actors[role] or not any(self.weights[k] for k in kinds):
                continue
            if kind in kinds or kind in ROLE_BOOTSTRAP_KINDS.get(role, ()):
                return True
        return False

    def to_json(self) -> dict[str, Any]:
        """Plain JSON data (dicts, lists, str, int, float, bool): the trace header's record."""
        obj: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Mapping):
                value = {
                    key: list(item) if isinstance(item, tuple) else item
                    for key, item in value.items()
                }
            elif isinstance(value, tuple):
                value = list(value)
            obj[f.name] = value
        return obj

    @classmethod
    def from_json(cls, obj: object) -> Profile:
        """Rebuild a profile from ``to_json`` output; unknown or missing fields are errors."""
        if type(obj) is not dict:
            raise ProfileError(f"profile: expected a JSON object, got {type(obj).__name__}")
        names = [f.name for f in dataclasses.fields(cls)]
        missing = [n for n in names if n not in obj]
        extra = sorted(str(k) for k in obj if k not in names)
        if missing or extra:
            raise ProfileError(f"profile: missing fields {missing}, unexpected fields {extra}")
        return cls(**obj)


# --------------------------------------------------------------------------- the profiles


def _weights(**overrides: int) -> dict[str, int]:
    """Every kind at its default weight, with ``overrides`` applied."""
    weights = {
        "create_topic": 2,
        "destroy_topic": 1,
        "create_group": 2,
        "destroy_group": 1,
        "exist_group": 1,
        "produce": 1,
        "consume": 1,
        "seek": 4,
        "seek_to_latest": 1,
        "get_latest": 2,
        "advance_clock": 1,
        "run_retention": 1,
        "crash_reopen": 1,
        "close_reopen": 1,
        "arm_crash": 1,
    }
    unknown = set(overrides) - set(weights)
    assert not unknown, f"unknown kinds {sorted(unknown)}"
    weights.update(overrides)
    return weights


def _actors(**overrides: int) -> dict[str, int]:
    actors = {
        "producer": 2,
        "consumer": 2,
        "seeker": 1,
        "group_churn": 1,
        "topic_churn": 1,
        "observer": 1,
        "clock": 1,
        "retention": 1,
        "crasher": 1,
    }
    assert set(overrides) <= set(actors), sorted(overrides)
    actors.update(overrides)
    return actors


def _think(**overrides: tuple[int, int]) -> dict[str, tuple[int, int]]:
    think = {
        "producer": (1, 3),
        "consumer": (1, 3),
        "seeker": (1, 4),
        "group_churn": (2, 6),
        "topic_churn": (3, 8),
        "observer": (2, 6),
        "clock": (5, 15),
        "retention": (5, 10),
        "crasher": (3, 6),
    }
    assert set(overrides) <= set(think), sorted(overrides)
    think.update(overrides)
    return think


_SMOKE = Profile(
    name="smoke",
    description="Small and fast; every operation kind, crashes and invalid arguments included, "
    "shows up within 300 steps. Crashes are rare (about five per run; crashy has many).",
    steps=300,
    config={"page_size_bytes": 128, "retention_time_s": 30, "retention_size_bytes": 512},
    actors=_actors(),
    think_time_s=_think(crasher=(12, 24)),
    weights=_weights(),
    invalid_names=(*DEFAULT_INVALID_NAMES, *OVER_LIMIT_NAMES[2:]),
    poll_sizes=(0, 1, 2, 3, 5, 1 << 20),
    clock_jumps_s=(1, 10, 29, 30, 31, 120),
)

_CRASHY = dataclasses.replace(
    _SMOKE,
    name="crashy",
    description="Frequent crash_reopen and arm_crash between and inside state-changing "
    "operations, with close_reopen for contrast; durability and all-or-nothing recovery.",
    steps=600,
    think_time_s=_think(crasher=(1, 3), producer=(0, 2), consumer=(0, 2)),
    weights=_weights(crash_reopen=3, close_reopen=1, arm_crash=5),
    arm_crash_max_hit=8,
)

_RETENTION = dataclasses.replace(
    _SMOKE,
    name="retention",
    description="Small pages and tight time/size limits; lagging and churning groups hold pages "
    "back or let them go; frequent clock jumps around retention_time_s (and a few backward) and "
    "frequent retention passes.",
    steps=1000,
    config={"page_size_bytes": 64, "retention_time_s": 20, "retention_size_bytes": 256},
    actors=_actors(consumer=3, seeker=1, topic_churn=1),
    think_time_s=_think(
        consumer=(1, 6),  # groups polled at uneven rates: some lag, some keep up
        clock=(2, 6),
        retention=(1, 4),
        crasher=(10, 30),
        topic_churn=(15, 40),
    ),
    weights=_weights(destroy_group=2, destroy_topic=1, create_topic=3),
    payload_size_bytes=(0, 48),
    batch_size=(1, 5),
    clock_jumps_s=(1, 5, 19, 20, 21, 40, 300, -3),
    # Large polls let groups catch up so pages get acked (about a third of the retention
    # passes then delete something, measured on the model); small ones keep others behind.
    poll_sizes=(1, 3, 10, 100, 1 << 20),
    target_groups_per_topic=2,
)

_SEEK_STORM = dataclasses.replace(
    _SMOKE,
    name="seek-storm",
    description="Many seekers: ids seen, retained away, never issued, negative, 0, digit "
    "boundaries and fixed-width extremes, plus seek_to_latest; consumers read after seeks.",
    steps=1000,
    config={"page_size_bytes": 96, "retention_time_s": 15, "retention_size_bytes": 400},
    actors=_actors(seeker=4, consumer=2, producer=2),
    think_time_s=_think(seeker=(0, 2), consumer=(1, 2), crasher=(10, 25)),
    weights=_weights(seek=6, seek_to_latest=2),
    seek_targets={
        "seen": 5,
        "retained_away": 3,
        "never_issued": 3,
        "negative": 2,
        "zero": 1,
        "boundary": 2,
        "extreme": 2,
    },
    clock_jumps_s=(1, 14, 15, 16, 60),
)

_CHURN_TOPICS: tuple[str, ...] = (
    "t",
    "t1",
    "t10",
    "at",
    "tt",
    "1",
    "10",
    *AT_LIMIT_NAMES,
    *CASE_PAIRS[0][1:],
    *NORMALIZATION_PAIRS[0],
)
_CHURN_GROUPS: tuple[str, ...] = (
    *("g", "g1", "g10", "ag", "0", "1", "10", "t", *AT_LIMIT_NAMES[:4]),
    *(CASE_PAIRS[1][1], "T", *NORMALIZATION_PAIRS[1]),
)

_CHURN = dataclasses.replace(
    _SMOKE,
    name="churn",
    description="Topic and group create/destroy/re-create churn over names that are prefixes "
    "and suffixes of each other, names that differ only by case or by Unicode normalization "
    "(NFC vs NFD), names at the 4096-byte limit (1- to 4-byte characters) and one byte over, "
    "and invalid names ('t/', NUL, empty, lone surrogate).",
    steps=800,
    actors=_actors(topic_churn=2, group_churn=2, producer=1, consumer=1),
    think_time_s=_think(topic_churn=(0, 3), group_churn=(0, 2), crasher=(8, 20)),
    weights=_weights(create_topic=3, destroy_topic=2, create_group=3, destroy_group=2),
    topic_names=_CHURN_TOPICS,
    group_names=_CHURN_GROUPS,
    invalid_names=(*DEFAULT_INVALID_NAMES, *OVER_LIMIT_NAMES[2:]),
    invalid_fraction=0.08,
    target_topics=4,
)

_DIGITS = dataclasses.replace(
    _SMOKE,
    name="digits",
    description="Enough produce volume for ids to cross 9->10, 99->100 and 999->1000 in one "
    "topic (and its prefix-sharing neighbour), with consumers and seeks around the boundaries "
    "and small pages closing across them.",
    steps=1500,
    # Retention on but loose: deleting "every id <= end_id" across 9->10 is where
    # byte-ordered decimal keys delete the wrong messages.
    config={"page_size_bytes": 40, "retention_time_s": 120, "retention_size_bytes": 1000},
    actors=_actors(producer=2, consumer=2, seeker=2, topic_churn=0, group_churn=1, clock=1),
    think_time_s=_think(producer=(0, 1), consumer=(1, 3), seeker=(1, 4), crasher=(20, 40)),
    weights=_weights(seek=3),
    topic_names=("d", "d1"),
    target_topics=2,
    batch_size=(1, 8),
    payload_size_bytes=(0, 8),
    poll_sizes=(0, 1, 2, 3, 7, 10, 100),
    seek_targets={
        "seen": 3,
        "retained_away": 1,
        "never_issued": 1,
        "negative": 0,
        "zero": 0,
        "boundary": 6,
        "extreme": 0,
    },
)

_SWARM = dataclasses.replace(
    _SMOKE,
    name="swarm",
    description="Swarm testing: each seed draws its own weights, actor counts, think times, "
    "sizes and config, and switches some operation kinds off entirely.",
    steps=1000,
    swarm=True,
)

PROFILES: dict[str, Profile] = {
    p.name: p for p in (_SMOKE, _CRASHY, _RETENTION, _SEEK_STORM, _CHURN, _DIGITS, _SWARM)
}


# --------------------------------------------------------------------------- swarm

#: The poll sizes a swarm seed draws from: small ones let backlogs build up, and polls of
#: thousands over them catch a queue that returns less than it should (a capped poll).
SWARM_POLL_SIZES: tuple[int, ...] = (0, 1, 2, 3, 5, 10, 50, 1000, 5000, 1 << 20)
#: The share of swarm seeds that produce in bulk (batches of up to
#: ``SWARM_BULK_BATCH_SIZE`` messages), so that backlogs of thousands build up for those
#: polls to read.
SWARM_BULK_SHARE = 0.25
SWARM_BULK_BATCH_SIZE = 200
#: Kinds swarm never switches off: without them no queue state is built at all.
SWARM_CORE_KINDS: tuple[str, ...] = ("create_topic", "create_group", "produce", "consume")


def _swarm_rng(seed: int) -> random.Random:
    """The swarm draws' own generator, independent of the simulation's ``Random(seed)``.

    A string seed is hashed with SHA-512 by ``random`` (not ``hash()``), so it is stable
    across processes; keeping the streams apart means a resolved profile replays exactly
    like its family, since the simulation's own stream does not depend on the draws.
    """
    return random.Random(f"rmqsim/swarm/{seed}")


def resolve(profile: Profile, seed: int) -> Profile:
    """The concrete profile for ``seed``: ``profile`` itself unless it is a swarm family."""
    if not profile.swarm:
        return profile
    rng = _swarm_rng(seed)
    weights = {}
    for kind in OP_KINDS:
        on = kind in SWARM_CORE_KINDS or rng.random() < 0.5
        weights[kind] = rng.randint(1, 8) if on else 0
    config = {
        "page_size_bytes": rng.choice((1, 8, 64, 256, 1024, 1 << 16)),
        "retention_time_s": rng.choice((-1, 0, 1, 5, 30, 300, 3600)),
        "retention_size_bytes": rng.choice((-1, 0, 1, 64, 512, 4096, 1 << 20)),
    }
    actors = {
        "producer": rng.randint(1, 3),
        "consumer": rng.randint(1, 3),
        "seeker": rng.randint(0, 2),
        "group_churn": rng.randint(0, 1),
        "topic_churn": rng.randint(0, 1),
        "observer": rng.randint(0, 1),
        "clock": 1,
        "retention": 1,
        "crasher": 1,
    }
    think = {}
    for role in ROLES:
        low = rng.randint(0, 3)
        think[role] = (low, low + rng.randint(0, 8))
    batch_low = rng.randint(0, 2)
    churny = rng.random() < 0.3
    bulk = rng.random() < SWARM_BULK_SHARE
    targets = {target: rng.randint(0, 4) for target in SEEK_TARGETS}
    targets["seen"] += 1
    return dataclasses.replace(
        profile,
        description=f"{profile.description} (resolved for seed {seed})",
        config=config,
        actors=actors,
        think_time_s=think,
        weights=weights,
        target_topics=rng.randint(1, 4),
        target_groups_per_topic=rng.randint(1, 3),
        topic_names=_CHURN_TOPICS if churny else profile.topic_names,
        group_names=_CHURN_GROUPS if churny else profile.group_names,
        invalid_fraction=rng.choice((0.0, 0.01, 0.05)),
        missing_fraction=rng.choice((0.0, 0.02, 0.1)),
        batch_size=(batch_low, SWARM_BULK_BATCH_SIZE if bulk else batch_low + rng.randint(0, 10)),
        payload_size_bytes=(0, rng.choice((0, 8, 64, 512, 4096))),
        empty_payload_fraction=rng.choice((0.0, 0.05, 0.3)),
        properties_per_message=(0, rng.randint(0, 3)),
        poll_sizes=tuple(sorted(rng.sample(SWARM_POLL_SIZES, rng.randint(1, 5)))),
        seek_targets=targets,
        clock_jumps_s=rng.choice(((1, 10), (1, 5, 30, 300), (1, 60, 3600, 86400), (1, 10, -5))),
        arm_crash_max_hit=rng.randint(1, 10),
        swarm=False,
    )
