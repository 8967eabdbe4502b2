"""A seeded simpy simulation of the stream layer (docs/STREAM.md).

Actors: producers (packs of Inserts and Deletes with hash keys, multi-row, now and then a
retried message, two Inserts sharing a message id, or a write below the last tick), a DDL
producer broadcasting CreateCollection, a time-tick source broadcasting ticks that rise by
100 (the last channel's reaching it ``tick_delay_s`` late, some sent twice), time-tick
consumers that keep the ``end_positions`` of each pack as their checkpoint and restart from
it, plain consumers that seek to positions they delivered, a crasher (the whole process:
every actor opens its stream again, the consumers from their checkpoints) and a retention
timer.

As the other simulations: one ``random.Random(seed)`` feeds every draw, time is whole
simulated seconds, and ``execute(step)`` returns the model's ``Outcome``, the only thing the
actors learn from (``StreamWorld``). After ``steps`` operations the producers, the ticker
and the faults stop; one last tick is sent and the consumers drain until each time-tick
consumer has delivered up to it and each plain consumer found nothing more, or
``drain_limit_s`` passed.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

import simpy

from rmqsim.scenarios.actors_base import ActorSimulation
from rmqsim.scenarios.queue.ops import Outcome, RunRetention, Step
from rmqsim.scenarios.stream.ops import (
    CREATE_COLLECTION,
    DELETE,
    INSERT,
    TIME_TICK,
    Broadcast,
    Consume,
    CrashQueue,
    OpenConsumer,
    OpenProducer,
    PlainPosition,
    Produce,
    RecreateChannel,
    Seek,
    StreamMsg,
    StreamOp,
)
from rmqsim.scenarios.stream.profiles import SEEK_CLASSES, StreamProfile

__all__ = ["TICK_STEP", "StreamSimulation", "StreamWorld"]

Execute = Callable[[Step[StreamOp]], Outcome]
#: Each tick is this much above the last; row timestamps fall within one step above it.
TICK_STEP = 100
TICKER, DDL = "ticker", "ddl"
#: A consumer that wakes calls consume() up to this many times (until it returns None).
BURST = 6


@dataclass
class _Reader:
    """What one consumer knows: its group, its checkpoint (time-tick) or the positions it
    delivered (plain), and whether it is caught up."""

    tt: bool
    group: str
    generation: int = 0
    checkpoint: tuple[PlainPosition, ...] = ()
    end_ts: int = 0
    delivered: list[PlainPosition] = field(default_factory=list)
    idle: bool = False


class StreamWorld:
    """What the actors learn from outcomes."""

    def __init__(self, profile: StreamProfile) -> None:
        self.last_tick = 0
        self.next_msg_id = 1
        self.next_row_id = 1
        self.readers: dict[str, _Reader] = {}
        #: Per channel: the last queue id issued, and the last issued before the channel
        #: was last re-created (the ids of its earlier life are at or below it).
        self.issued: dict[str, int] = {}
        self.boundary: dict[str, int] = {}
        #: Whether retention ran (the first ids of a channel may be gone).
        self.retained = False
        for index in range(profile.tt_consumers):
            self.readers[f"tt-{index}"] = _Reader(tt=True, group=f"tt-{index}")
        for index in range(profile.plain_consumers):
            self.readers[f"plain-{index}"] = _Reader(tt=False, group=f"plain-{index}")

    def learn(self, op: StreamOp, outcome: Outcome) -> None:
        if outcome.error is not None:
            return
        if type(op) is Produce or type(op) is Broadcast:
            assert type(outcome.value) is tuple, "a write is ((channel, (ids...)), ...)"
            for channel, ids in outcome.value:
                self.issued[channel] = max((self.issued.get(channel, 0), *ids))
        elif type(op) is RecreateChannel:
            self.boundary[op.channel] = self.issued.get(op.channel, 0)
        elif type(op) is RunRetention:
            self.retained = True
        if type(op) is not Consume:
            return
        reader = self.readers[op.consumer]
        reader.idle = outcome.value is None
        if outcome.value is None:
            return
        assert type(outcome.value) is tuple, "a pack is (begin, end, msgs, starts, ends)"
        _begin, end_ts, msgs, _starts, ends = outcome.value
        if reader.tt:
            reader.checkpoint, reader.end_ts = ends, end_ts
        else:
            reader.delivered += [(msg[5], msg[6], msg[3]) for msg in msgs]

    def drained(self) -> bool:
        return all(r.end_ts >= self.last_tick if r.tt else r.idle for r in self.readers.values())


class StreamSimulation(ActorSimulation[StreamOp, StreamWorld]):
    """One run of a stream profile (resolved: not a swarm family); runs once."""

    def __init__(self, profile: StreamProfile, seed: int, steps: int | None = None) -> None:
        assert not (profile.swarm or profile.steered), "resolve a family first (resolve_stream)"
        super().__init__(seed, StreamWorld(profile))
        self.profile = profile
        self.steps = profile.steps if steps is None else steps
        self.draining = False

    @property
    def producers(self) -> list[str]:
        return [f"producer-{index}" for index in range(self.profile.producers)]

    def run(self, execute: Execute) -> int:
        """Run the active phase and the drain; return the operations executed."""
        self.execute = execute
        self._open_all()
        self._start_actors()
        deadline_s: list[int] = []

        def done() -> bool:
            if not deadline_s and self.executed >= self.steps:
                deadline_s.append(self._start_drain())
            return bool(deadline_s) and (self.world.drained() or self.env.now > deadline_s[0])

        self.step_until(done)
        return self.executed

    def _start_actors(self) -> None:
        profile, env = self.profile, self.env
        for name in self.producers:
            env.process(self._producer(name))
        env.process(self._ticker())
        if profile.ddl_every_s is not None:
            env.process(self._ddl(profile.ddl_every_s))
        for name in self.world.readers:
            env.process(self._consumer(name))
        if profile.crash_every_s is not None:
            env.process(self._crasher(profile.crash_every_s))
        if profile.retention_every_s is not None:
            env.process(self._every(profile.retention_every_s, "retention", RunRetention))
        if profile.recreate_every_s is not None:
            env.process(self._recreator(profile.recreate_every_s))

    def _start_drain(self) -> int:
        self.draining = True
        self._tick_all(self.world.last_tick + TICK_STEP, to_all=True)
        return int(self.env.now) + self.profile.drain_limit_s

    # ------------------------------------------------------------------ opening

    def _open_producers(self, actor: str) -> None:
        whole = set(self.producers[len(self.producers) - self.profile.whole_producers :])
        for name in [*self.producers, TICKER, DDL]:
            self.emit(actor, OpenProducer(name, name in whole))

    def _open_all(self) -> None:
        self._open_producers("setup")
        for name in self.world.readers:
            self._reopen(name)

    def _reopen(self, name: str) -> None:
        """(Re)open consumer ``name``, resuming from its checkpoint or delivered positions."""
        reader = self.world.readers[name]
        if reader.tt and reader.generation and not reader.checkpoint:
            # never delivered a pack: no checkpoint, start over in a fresh group
            reader.group = f"{name}-{reader.generation}"
        fraction = self.profile.latest_fraction
        latest = bool(fraction) and self.rng.random() < fraction
        self.emit(name, OpenConsumer(name, reader.tt, reader.group, latest))
        reader.generation += 1
        if latest:  # it starts where its group was moved: at the latest message
            return
        if reader.tt and reader.checkpoint:
            self._resume_tt(name, reader)
        elif not reader.tt and reader.delivered:
            last: dict[str, PlainPosition] = {p[0]: p for p in reader.delivered}
            self.emit(name, Seek(name, tuple(last[c] for c in sorted(last)), False))

    def _resume_tt(self, name: str, reader: _Reader) -> None:
        """Seek a reopened time-tick consumer to its checkpoint, or now and then (the
        profile's ``wild_seek_fraction``) to the checkpoint with one position of another
        class, or to it after a ``consume()`` (refused)."""
        positions = reader.checkpoint
        kind = self._wild_kind(tt=True)
        if kind == "after-consume":
            self.emit(name, Consume(name))
        elif kind is not None:
            index = self.rng.randrange(len(positions))
            wild = self._wild_position(kind, list(positions), positions[index])
            kept = positions[:index] + positions[index + 1 :]
            if wild[0] in self.profile.channel_names:
                positions = (*kept[:index], wild, *kept[index:])
            else:  # a channel it does not consume: named as well
                positions = (*positions, wild)
        self.emit(name, Seek(name, positions, include_current=True))

    def _wild_kind(self, *, tt: bool) -> str | None:
        """The class of a seek position other than the consumer's own (None: its own),
        drawn as the profile says (its ``focus``, else ``SEEK_CLASSES``)."""
        fraction = self.profile.wild_seek_fraction
        if not fraction or self.rng.random() >= fraction:
            return None
        classes = [c for c in self.profile.focus or SEEK_CLASSES if tt or c != "after-consume"]
        return self.rng.choice(classes) if classes else None

    def _wild_position(
        self, kind: str, known: list[PlainPosition], own: PlainPosition
    ) -> PlainPosition:
        """A position of class ``kind`` on ``own``'s channel (``known``: the positions
        the consumer holds); ``own`` itself when the world offers none of that class."""
        rng, world = self.rng, self.world
        channel, queue_id, ts = own
        issued = world.issued.get(channel, 0)
        boundary = world.boundary.get(channel, 0)
        if kind == "undelivered":
            seen = max((q for c, q, _ in known if c == channel), default=0)
            return (channel, rng.randint(seen + 1, issued), ts) if issued > seen else own
        if kind == "other-channel":
            others = [p for p in known if p[0] != channel and p[1] != queue_id]
            return (channel, rng.choice(others)[1], ts) if others else own
        if kind == "earliest":
            return (channel, boundary + 1, ts) if issued > boundary else own
        if kind == "trimmed":
            older = queue_id - 1 > boundary and world.retained
            return (channel, rng.randint(boundary + 1, queue_id - 1), ts) if older else own
        if kind == "recreated":
            return (channel, rng.randint(1, boundary), ts) if boundary else own
        if kind == "unknown-channel":
            return (f"ch{self.profile.channels}", queue_id, ts)
        assert kind == "never-issued", kind
        return (channel, issued + rng.randint(1, 3), ts)

    # ------------------------------------------------------------------ writers

    def _row_ts(self, late: bool) -> int:
        base = self.world.last_tick
        if late and base > 0:
            return self.rng.randint(max(1, base - TICK_STEP), base)
        return base + self.rng.randint(1, TICK_STEP + TICK_STEP // 2)

    def _dml(self, late: bool) -> StreamMsg:
        world, rng = self.world, self.rng
        msg_type = DELETE if rng.random() < self.profile.delete_fraction else INSERT
        count = self.between(self.profile.rows)
        rows = []
        for _ in range(count):
            rows.append((world.next_row_id, self._row_ts(late)))
            world.next_row_id += 1
        keys = tuple(
            rng.randrange(2**32) if rng.random() < 0.2 else rng.randrange(16) for _ in rows
        )
        world.next_msg_id += 1
        return StreamMsg(
            msg_type, world.next_msg_id, 0, keys, rng.randbytes(rng.randint(0, 8)), tuple(rows)
        )

    def _pack(self) -> tuple[StreamMsg, ...]:
        late = self.rng.random() < self.profile.late_write_fraction
        msgs = [self._dml(late) for _ in range(self.between(self.profile.pack_size))]
        if self.rng.random() < self.profile.retry_fraction:
            if self.rng.random() < 0.5:
                msgs.append(msgs[-1])  # a producer's retry: the very same message
            else:  # two distinct Inserts sharing one message id (Milvus #18216)
                twin = self._dml(late)
                msgs.append(
                    StreamMsg(INSERT, msgs[-1].msg_id, 0, twin.hash_keys, twin.payload, twin.rows)
                )
        return tuple(msgs)

    def _producer(self, name: str) -> Generator[simpy.Event, Any, None]:
        while True:
            yield self.env.timeout(self.between(self.profile.produce_every_s))
            if self.draining:
                return
            self.emit(name, Produce(name, self._pack()))

    def _ddl(self, every_s: tuple[int, int]) -> Generator[simpy.Event, Any, None]:
        while True:
            yield self.env.timeout(self.between(every_s))
            if self.draining:
                return
            self.world.next_msg_id += 1
            msg = StreamMsg(CREATE_COLLECTION, self.world.next_msg_id, self._row_ts(False), (0,))
            self.emit(DDL, Broadcast(DDL, (msg,)))

    # ------------------------------------------------------------------ ticks

    def _tick_all(self, tick: int, to_all: bool) -> None:
        """Tick every channel (``to_all``) or every channel but the delayed last one."""
        self.world.last_tick = tick
        if to_all or self.profile.tick_delay_s is None:
            self.emit(TICKER, Broadcast(TICKER, (StreamMsg(TIME_TICK, 0, tick, (0,)),)))
            return
        delayed = self.profile.channels - 1
        ticks = tuple(StreamMsg(TIME_TICK, 0, tick, (key,)) for key in range(delayed))
        if ticks:
            self.emit(TICKER, Produce(TICKER, ticks))
        self.env.process(self._late_tick(tick, delayed, self.profile.tick_delay_s))

    def _late_tick(
        self, tick: int, channel: int, delay_s: int
    ) -> Generator[simpy.Event, Any, None]:
        yield self.env.timeout(delay_s)
        self.emit(TICKER, Produce(TICKER, (StreamMsg(TIME_TICK, 0, tick, (channel,)),)))

    def _ticker(self) -> Generator[simpy.Event, Any, None]:
        while True:
            yield self.env.timeout(self.between(self.profile.tick_every_s))
            if self.draining:
                return
            repeat = (
                self.world.last_tick > 0 and self.rng.random() < self.profile.repeat_tick_fraction
            )
            tick = self.world.last_tick if repeat else self.world.last_tick + TICK_STEP
            self._tick_all(tick, to_all=False)

    # ------------------------------------------------------------------ readers

    def _consumer(self, name: str) -> Generator[simpy.Event, Any, None]:
        profile, reader = self.profile, self.world.readers[name]
        every_s = profile.restart_every_s if reader.tt else profile.seek_every_s
        next_s = None if every_s is None else self.between(every_s)
        while not (self.draining and self.world.drained()):
            yield self.env.timeout(self.between(profile.consume_every_s))
            if next_s is not None and self.env.now >= next_s and not self.draining:
                next_s = int(self.env.now) + self.between(every_s or (1, 1))
                if reader.tt:
                    self._reopen(name)
                else:
                    self._seek(name, reader)
            for _ in range(self.rng.randint(1, BURST)):
                if self.emit(name, Consume(name)).value is None:
                    break

    def _seek(self, name: str, reader: _Reader) -> None:
        if not reader.delivered:
            return
        rng = self.rng
        chosen: dict[str, PlainPosition] = {}
        for _ in range(rng.randint(1, 3)):
            position = rng.choice(reader.delivered[-20:])
            kind = self._wild_kind(tt=False)
            if kind is not None:
                position = self._wild_position(kind, reader.delivered[-20:], position)
            chosen[position[0]] = position
        positions = tuple(chosen[c] for c in sorted(chosen))
        self.emit(name, Seek(name, positions, rng.random() < 0.5))

    # ------------------------------------------------------------------ faults

    def _every(
        self, span: tuple[int, int], actor: str, make: Callable[[], StreamOp]
    ) -> Generator[simpy.Event, Any, None]:
        while not (self.draining and self.world.drained()):
            yield self.env.timeout(self.between(span))
            self.emit(actor, make())

    def _recreator(self, span: tuple[int, int]) -> Generator[simpy.Event, Any, None]:
        """Now and then one channel is destroyed and created again underneath; every
        consumer opens its stream again (its group is gone there) and resumes."""
        while True:
            yield self.env.timeout(self.between(span))
            if self.draining:
                return
            self.emit("recreator", RecreateChannel(self.rng.choice(self.profile.channel_names)))
            for name in self.world.readers:
                self._reopen(name)

    def _crasher(self, span: tuple[int, int]) -> Generator[simpy.Event, Any, None]:
        while True:
            yield self.env.timeout(self.between(span))
            if self.draining:
                return
            self.emit("crasher", CrashQueue())
            self._open_producers("crasher")
            for name in self.world.readers:
                self._reopen(name)
