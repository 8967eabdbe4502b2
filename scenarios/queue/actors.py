"""The actors: one class per role, each turning beliefs and random draws into one operation.

An actor never calls the queue and never sees anything but outcomes (through ``World``); the
simulation wakes it, asks ``next_op()`` for exactly one operation, executes it and feeds the
outcome back to the world. Every random draw comes from the simulation's single
``random.Random``, over tuples or lists in a fixed order, so a seed replays exactly.

Each role's mix of operation kinds comes from ``Profile.weights``; roles that need a topic
or a group create one first while fewer than the profile's targets are believed to exist
(bootstrap), and a small fraction of operations are made invalid or aimed at something
absent (see ``profiles``).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import ClassVar

from rmqsim.scenarios.names import MISSING_NAME, PROPERTY_KEYS, PROPERTY_VALUES
from rmqsim.scenarios.queue.ops import (
    AdvanceClock,
    ArmCrash,
    CloseReopen,
    Consume,
    CrashReopen,
    CreateGroup,
    CreateTopic,
    DestroyGroup,
    DestroyTopic,
    ExistGroup,
    GetLatest,
    Message,
    Op,
    Produce,
    RunRetention,
    Seek,
    SeekToLatest,
)
from rmqsim.scenarios.queue.profiles import ROLE_KINDS, SEEK_TARGETS, SINGLETON_ROLES, Profile
from rmqsim.scenarios.queue.world import World

__all__ = ["ACTOR_TYPES", "BOUNDARY_IDS", "EXTREME_IDS", "Actor", "Context", "build_actors"]

#: Ids on both sides of the decimal-width changes: byte order and numeric order of unpadded
#: decimal keys disagree exactly here (SPEC [Milvus]).
BOUNDARY_IDS: tuple[int, ...] = (9, 10, 11, 99, 100, 101, 999, 1000, 1001, 9999, 10000)
#: Ids at and around the limits of fixed-width integer encodings.
EXTREME_IDS: tuple[int, ...] = (
    2**31 - 1,
    2**31,
    2**32,
    2**63 - 1,
    2**63,
    2**64,
    -(2**63),
    -(2**63) - 1,
)

# Operations without fields are immutable values: one instance each serves every emission.
_RUN_RETENTION = RunRetention()
_CRASH_REOPEN = CrashReopen()
_CLOSE_REOPEN = CloseReopen()


class Context:
    """What every actor shares: the one rng, the resolved profile, the beliefs, the clock.

    The profile's knobs are copied into attributes once, because actors read them on every
    operation and attribute access on a frozen dataclass with mappings is comparatively slow.
    """

    def __init__(
        self, rng: random.Random, profile: Profile, world: World, clock_s: Callable[[], int]
    ) -> None:
        self.rng = rng
        self.profile = profile
        self.world = world
        self.clock_s = clock_s
        self.topic_names = profile.topic_names
        self.group_names = profile.group_names
        self.invalid_names = profile.invalid_names
        self.invalid_fraction = float(profile.invalid_fraction)
        self.missing_fraction = float(profile.missing_fraction)
        self.target_topics = profile.target_topics
        self.target_groups = profile.target_groups_per_topic
        self.create_topic_on = profile.weights["create_topic"] > 0
        self.create_group_on = profile.weights["create_group"] > 0
        self.batch_lo, self.batch_hi = profile.batch_size
        self.payload_lo, payload_hi = profile.payload_size_bytes
        self.payload_span = payload_hi - self.payload_lo + 1
        self.empty_payload_fraction = float(profile.empty_payload_fraction)
        self.props_lo, props_hi = profile.properties_per_message
        self.props_span = props_hi - self.props_lo + 1
        self.poll_sizes = profile.poll_sizes
        self.clock_jumps_s = profile.clock_jumps_s
        self.seek_classes = tuple(t for t in SEEK_TARGETS if profile.seek_targets[t] > 0)
        self.seek_cum_weights = _cumulative([profile.seek_targets[t] for t in self.seek_classes])

    # ------------------------------------------------------------------ random helpers

    def invalid(self) -> bool:
        """Draw whether this operation is made invalid."""
        return self.invalid_fraction > 0.0 and self.rng.random() < self.invalid_fraction

    def missing(self) -> bool:
        """Draw whether this operation aims at something absent."""
        return self.missing_fraction > 0.0 and self.rng.random() < self.missing_fraction

    def invalid_name(self) -> str:
        """An invalid topic or group name from the profile's pool."""
        return self.rng.choice(self.invalid_names)

    def absent_topic(self) -> str | None:
        """A pool topic name not believed to exist, or None when all are."""
        groups = self.world.groups
        absent = [name for name in self.topic_names if name not in groups]
        return self.rng.choice(absent) if absent else None

    def absent_group(self, topic: str) -> str | None:
        """A pool group name not believed to exist on ``topic``, or None when all are."""
        present = self.world.groups.get(topic, ())
        absent = [name for name in self.group_names if name not in present]
        return self.rng.choice(absent) if absent else None

    # ------------------------------------------------------------------ targets

    def topic_or_bootstrap(self) -> str | CreateTopic:
        """A topic to operate on, or the ``CreateTopic`` to emit first.

        Mostly a believed-existing topic; ``missing_fraction`` of the time an absent one;
        while fewer than ``target_topics`` exist (and create_topic is on), a create.
        """
        world = self.world
        if self.create_topic_on and len(world.topics) < self.target_topics:
            name = self.absent_topic()
            if name is not None:
                return CreateTopic(name)
        if self.missing() or not world.topics:
            name = self.absent_topic()
            return name if name is not None else MISSING_NAME
        return self.rng.choice(world.topics)

    def group_or_bootstrap(self) -> tuple[str, str] | CreateTopic | CreateGroup:
        """A (topic, group) to operate on, or the create to emit first (see above)."""
        topic = self.topic_or_bootstrap()
        if isinstance(topic, CreateTopic):
            return topic
        groups = self.world.groups.get(topic)
        if groups is not None and self.create_group_on and len(groups) < self.target_groups:
            name = self.absent_group(topic)
            if name is not None:
                return CreateGroup(topic, name)
        if self.missing() or not groups:
            name = self.absent_group(topic)
            return (topic, name if name is not None else MISSING_NAME)
        return (topic, self.rng.choice(groups))

    # ------------------------------------------------------------------ payloads

    def message(self) -> Message:
        """One message: payload size from the profile (some empty), 0..k unicode properties.

        The hot path of produce-heavy profiles, so it draws with ``random()`` and index
        arithmetic (``_below``, inlined) instead of ``randint``/``choice``, which cost more.
        """
        rng = self.rng
        random = rng.random
        if random() < self.empty_payload_fraction:
            payload = b""
        else:
            payload = rng.randbytes(self.payload_lo + int(random() * self.payload_span))
        count = self.props_lo + int(random() * self.props_span)
        if count == 0:
            return Message(payload)
        values = PROPERTY_VALUES
        if count == 1:
            key = PROPERTY_KEYS[int(random() * len(PROPERTY_KEYS))]
            return Message(payload, ((key, values[int(random() * len(values))]),))
        keys = sorted(rng.sample(PROPERTY_KEYS, count))
        return Message(payload, tuple((key, values[int(random() * len(values))]) for key in keys))


def _below(fraction: float, count: int) -> int:
    """An int in [0, count) from a ``random()`` draw in [0, 1): cheaper than ``randrange``.

    Deterministic like every draw from the one rng. ``int(fraction * count) < count`` for
    every ``count <= 2**53``, because ``random() <= 1 - 2**-53`` and the product then stays
    at least half an ulp below ``count``; the hot paths inline this expression.
    """
    assert 0 < count <= 2**53
    return int(fraction * count)


def _cumulative(weights: list[int]) -> list[int]:
    total = 0
    out = []
    for weight in weights:
        total += weight
        out.append(total)
    return out


class Actor:
    """One simulated client: wakes after a think time and emits exactly one operation."""

    role: ClassVar[str]

    __slots__ = ("ctx", "cum_weights", "kinds", "name", "think_s")

    def __init__(self, name: str, ctx: Context) -> None:
        self.name = name
        self.ctx = ctx
        weights = ctx.profile.weights
        self.kinds: tuple[str, ...] = tuple(k for k in ROLE_KINDS[self.role] if weights[k] > 0)
        self.cum_weights = _cumulative([weights[k] for k in self.kinds])
        self.think_s: tuple[int, int] = ctx.profile.think_time_s[self.role]

    @property
    def enabled(self) -> bool:
        """False when every kind of this role is switched off: the actor is not started."""
        return bool(self.kinds)

    def choose_kind(self) -> str:
        """One of this role's enabled kinds, by weight."""
        kinds = self.kinds
        if len(kinds) == 1:
            return kinds[0]
        return self.ctx.rng.choices(kinds, cum_weights=self.cum_weights)[0]

    def next_op(self) -> Op:
        """The operation to emit now."""
        raise NotImplementedError


class Producer(Actor):
    """Produces batches (sizes and payload sizes from the profile, some empty)."""

    role = "producer"
    __slots__ = ()

    def next_op(self) -> Op:
        ctx = self.ctx
        topic = ctx.topic_or_bootstrap()
        if isinstance(topic, CreateTopic):
            return topic
        if ctx.invalid():
            topic = ctx.invalid_name()
        count = ctx.batch_lo + _below(ctx.rng.random(), ctx.batch_hi - ctx.batch_lo + 1)
        message = ctx.message
        return Produce(topic, tuple(message() for _ in range(count)))


class Consumer(Actor):
    """Polls a group with a size from ``poll_sizes`` (0 included); some ``n < 0``."""

    role = "consumer"
    __slots__ = ()

    def next_op(self) -> Op:
        ctx = self.ctx
        target = ctx.group_or_bootstrap()
        if not isinstance(target, tuple):
            return target
        topic, group = target
        n = ctx.rng.choice(ctx.poll_sizes)
        if ctx.invalid():
            which = ctx.rng.randrange(3)
            if which == 0:
                n = -ctx.rng.randint(1, 3)
            elif which == 1:
                topic = ctx.invalid_name()
            else:
                group = ctx.invalid_name()
        return Consume(topic, group, n)


class Seeker(Actor):
    """Seeks a group to ids of every class in ``SEEK_TARGETS``, or to the latest."""

    role = "seeker"
    __slots__ = ()

    def seek_id(self, topic: str) -> int:
        """An id of a class drawn by ``seek_targets`` weight, from what the world saw."""
        ctx = self.ctx
        rng = ctx.rng
        target = rng.choices(ctx.seek_classes, cum_weights=ctx.seek_cum_weights)[0]
        issued = ctx.world.issued_max.get(topic, 0)
        first = ctx.world.recent_first.get(topic, 1)
        if target == "seen":
            return rng.randint(max(1, min(first, issued)), issued) if issued >= 1 else 1
        if target == "retained_away":
            return rng.randint(1, first - 1) if first > 1 else 1
        if target == "never_issued":
            return issued + rng.randint(1, 3)
        if target == "negative":
            return rng.choice((-1, -1, -2, -rng.randint(3, 10**6)))
        if target == "zero":
            return 0
        if target == "boundary":
            return rng.choice(BOUNDARY_IDS)
        assert target == "extreme", target
        return rng.choice(EXTREME_IDS)

    def next_op(self) -> Op:
        ctx = self.ctx
        target = ctx.group_or_bootstrap()
        if not isinstance(target, tuple):
            return target
        topic, group = target
        kind = self.choose_kind()
        msg_id = self.seek_id(topic) if kind == "seek" else 0
        if ctx.invalid():
            if ctx.rng.random() < 0.5:
                topic = ctx.invalid_name()
            else:
                group = ctx.invalid_name()
        if kind == "seek":
            return Seek(topic, group, msg_id)
        return SeekToLatest(topic, group)


class GroupChurn(Actor):
    """Creates, destroys and probes groups on existing topics (including absent ones)."""

    role = "group_churn"
    __slots__ = ()

    def next_op(self) -> Op:
        ctx = self.ctx
        rng = ctx.rng
        topic = ctx.topic_or_bootstrap()
        if isinstance(topic, CreateTopic):
            return topic
        kind = self.choose_kind()
        groups = ctx.world.groups.get(topic) or []
        if kind == "create_group":
            # Mostly a new group; sometimes any pool name, so GroupExists happens too.
            group = ctx.absent_group(topic) if rng.random() < 0.8 else None
            if group is None:
                group = rng.choice(ctx.group_names)
        elif kind == "destroy_group":
            # Mostly an existing group; sometimes any pool name (absent is not an error).
            group = rng.choice(groups) if groups and rng.random() < 0.8 else None
            if group is None:
                group = rng.choice(ctx.group_names)
        else:
            group = rng.choice(ctx.group_names)
        if ctx.invalid():
            if rng.random() < 0.5:
                topic = ctx.invalid_name()
            else:
                group = ctx.invalid_name()
        if kind == "create_group":
            return CreateGroup(topic, group)
        if kind == "destroy_group":
            return DestroyGroup(topic, group)
        return ExistGroup(topic, group)


class TopicChurn(Actor):
    """Creates, destroys and re-creates topics from the pool (and invalid names)."""

    role = "topic_churn"
    __slots__ = ()

    def next_op(self) -> Op:
        ctx = self.ctx
        rng = ctx.rng
        kind = self.choose_kind()
        name: str | None
        if ctx.invalid():
            name = ctx.invalid_name()
        elif kind == "create_topic":
            # Mostly a new (or re-created) topic; sometimes any name: create is idempotent.
            name = ctx.absent_topic() if rng.random() < 0.8 else None
            if name is None:
                name = rng.choice(ctx.topic_names)
        else:
            # Mostly an existing topic; sometimes any pool name, so TopicNotFound happens.
            topics = ctx.world.topics
            name = rng.choice(topics) if topics and rng.random() < 0.85 else None
            if name is None:
                name = rng.choice(ctx.topic_names)
        if kind == "create_topic":
            return CreateTopic(name)
        return DestroyTopic(name)


class Observer(Actor):
    """Reads without changing: get_latest on topics, exist_group on pool group names."""

    role = "observer"
    __slots__ = ()

    def next_op(self) -> Op:
        ctx = self.ctx
        topic = ctx.topic_or_bootstrap()
        if isinstance(topic, CreateTopic):
            return topic
        kind = self.choose_kind()
        if ctx.invalid():
            topic = ctx.invalid_name()
        if kind == "get_latest":
            return GetLatest(topic)
        return ExistGroup(topic, ctx.rng.choice(ctx.group_names))


class ClockJumper(Actor):
    """Jumps the SUT clock by a profile amount; a backward jump never goes below 0."""

    role = "clock"
    __slots__ = ()

    def next_op(self) -> Op:
        ctx = self.ctx
        jump_s = ctx.rng.choice(ctx.clock_jumps_s)
        now_s = ctx.clock_s()
        if now_s + jump_s < 0:
            jump_s = -now_s
        return AdvanceClock(jump_s)


class RetentionTicker(Actor):
    """Runs a retention pass at every tick (the think time is the tick interval)."""

    role = "retention"
    __slots__ = ()

    def next_op(self) -> Op:
        return _RUN_RETENTION


class Crasher(Actor):
    """Crashes (between operations or armed inside the next one) and cleanly reopens.

    Its kinds come from a shuffled bag holding each enabled kind as many times as its
    weight, refilled when empty: the weights hold exactly over each bag, and every kind
    shows up within the first bag. Crashes are the costliest operations of a run (a reopen
    of the database and a full comparison each), so a profile can keep them rare without
    leaving a kind out.
    """

    role = "crasher"
    __slots__ = ("bag",)

    def __init__(self, name: str, ctx: Context) -> None:
        super().__init__(name, ctx)
        self.bag: list[str] = []

    def choose_kind(self) -> str:
        if not self.bag:
            weights = self.ctx.profile.weights
            self.bag = [kind for kind in self.kinds for _ in range(weights[kind])]
            self.ctx.rng.shuffle(self.bag)
        return self.bag.pop()

    def next_op(self) -> Op:
        ctx = self.ctx
        kind = self.choose_kind()
        if kind == "crash_reopen":
            return _CRASH_REOPEN
        if kind == "close_reopen":
            return _CLOSE_REOPEN
        rng = ctx.rng
        hit = rng.randint(1, ctx.profile.arm_crash_max_hit)
        points = ctx.profile.crash_points
        point = rng.choice(points) if points and rng.random() < 0.5 else None
        return ArmCrash(hit, point)


#: Actor class per role, in ``ROLES`` order.
ACTOR_TYPES: dict[str, type[Actor]] = {
    cls.role: cls
    for cls in (
        Producer,
        Consumer,
        Seeker,
        GroupChurn,
        TopicChurn,
        Observer,
        ClockJumper,
        RetentionTicker,
        Crasher,
    )
}
assert tuple(ACTOR_TYPES) == tuple(ROLE_KINDS)


def build_actors(ctx: Context) -> list[Actor]:
    """The enabled actors of the profile, in role order then index order.

    Names are ``<role>-<i>`` with ``_`` written ``-`` ("producer-0", "group-churn-1"); the
    singleton roles are named by the role alone ("clock", "retention", "crasher").
    """
    actors: list[Actor] = []
    for role, cls in ACTOR_TYPES.items():
        count = ctx.profile.actors[role]
        for index in range(count):
            if role in SINGLETON_ROLES:
                assert count <= 1, role
                name = role
            else:
                name = f"{role.replace('_', '-')}-{index}"
            actor = cls(name, ctx)
            if actor.enabled:
                actors.append(actor)
    return actors
