"""Experiment (not part of rmqsim): how fast could a *pipelined two-process* lockstep be?

Issue 4 asks for 10,000 lockstep operations per second on smoke. One idea is to split the
work over the machine's two cores: this process runs the simulation, the model and the
model's snapshots; a child process runs the SUT and its snapshots; operations and results
travel in batches, so neither side waits for the other's round trip. The checks are those
of ``conformance.lockstep.Lockstep`` with its defaults: every outcome, the touched topic
(new messages only) after every state-changing operation, the whole state every 64
changes, after every reopen, after ``run_retention`` and at the end.

Optimistic on purpose, to measure the design's ceiling: one child serves every seed (no
process start per run), and armed crashes are not supported (smoke arms a few; a real
design would drain the pipeline there). It prints its rate next to ``run_seed``'s, measured
in the same run, and each side's CPU time per operation.

    .venv/bin/python scripts/experiments/pipelined_lockstep.py --seeds 10 --repeats 3
"""

from __future__ import annotations

import argparse
import copyreg
import multiprocessing as mp
import pickle
import tempfile
import time
import types
from collections import deque
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from conformance.adapter import DEFAULT_IMPL, resolve_impl
from conformance.apply import RUNNER_KINDS, apply_op
from conformance.lockstep import DEFAULT_FULL_CHECK_EVERY, SimClock, _equal
from conformance.run import run_seed
from conformance.scratch import scratch_root
from model import ReferenceMQ
from model.api import MQConfig
from scenarios.ops import STATE_CHANGING, Outcome, Step
from scenarios.profiles import get_profile, resolve
from scenarios.simulation import Simulation

# pickle is safe here only because both ends are this script: an anonymous pipe to its
# own forked child, never a file, a trace or a database (rmqsim itself unpickles none).

#: Batches in flight before the parent waits for results.
MAX_IN_FLIGHT = 2
FULL = "full"


def _mappingproxy(items: dict[Any, Any]) -> types.MappingProxyType[Any, Any]:
    return types.MappingProxyType(items)


# States hold read-only mappings, which pickle cannot send as they are.
copyreg.pickle(types.MappingProxyType, lambda proxy: (_mappingproxy, (dict(proxy),)))


def _child(conn: Connection) -> None:
    """Serve runs: ("open", config) starts one on a fresh database; ("steps", batch)
    applies a batch and answers with (outcome, snapshot or None) per step."""
    _, factory = resolve_impl(DEFAULT_IMPL)
    clock = SimClock()
    root = Path(tempfile.mkdtemp(prefix="rmqsim-pipelined-", dir=scratch_root()))
    sut: Any = None
    runs = 0
    cpu_s = 0.0
    while True:
        message = pickle.loads(conn.recv_bytes())
        started = time.process_time()
        if message[0] == "stop":
            break
        if message[0] == "open":
            if sut is not None:
                sut.crash()
            runs += 1
            path = root / str(runs)
            config = message[1]
            sut = factory(path=path, config=config, clock=clock, faults=None)
            cpu_s += time.process_time() - started
            continue
        results = []
        for time_s, op, check in message[1]:
            clock.now_s = time_s
            if op.kind in ("crash_reopen", "close_reopen"):
                sut.crash() if op.kind == "crash_reopen" else sut.close()
                sut = factory(path=path, config=config, clock=clock, faults=None)
                outcome = Outcome()
            elif op.kind in RUNNER_KINDS:
                outcome = Outcome()
            else:
                outcome = apply_op(sut, op)
            if check is None:
                snapshot = None
            elif check == FULL:
                snapshot = sut.snapshot()
            else:
                topic, first = check
                snapshot = sut.snapshot(topics=[topic], messages_from={topic: first})
            results.append((outcome, snapshot))
        conn.send_bytes(pickle.dumps(results, pickle.HIGHEST_PROTOCOL))
        cpu_s += time.process_time() - started
    if sut is not None:
        sut.crash()
    conn.send_bytes(pickle.dumps(cpu_s))


class _Parent:
    """Simulation + model + model snapshots here; compares what the child sends back."""

    def __init__(self, conn: Connection, batch_steps: int) -> None:
        self.conn = conn
        self.batch_steps = batch_steps
        self.in_flight = 0
        self.batch: list[tuple[int, Any, Any]] = []
        self.expected: deque[tuple[Outcome, Any, list[str] | None]] = deque()

    def run(self, profile_name: str, seed: int) -> int:
        profile = resolve(get_profile(profile_name), seed)
        config = MQConfig(**profile.config)
        self.conn.send_bytes(pickle.dumps(("open", config)))
        self.clock = SimClock()
        self.model = ReferenceMQ(config, clock=self.clock)
        self.since_full = 0
        self.steps = 0
        Simulation(profile, seed).run(self.execute)
        self._expect(Outcome(), (self.clock.now_s, _END, FULL), self.model.snapshot(), None)
        self._flush()
        while self.in_flight:
            self._receive()
        return self.steps

    def execute(self, step: Step) -> Outcome:
        self.steps += 1
        self.clock.now_s = step.time_s
        op = step.op
        model = self.model
        check: Any = None
        snapshot = None
        topics = None
        if op.kind in RUNNER_KINDS:
            outcome = Outcome()
            if op.kind in ("crash_reopen", "close_reopen"):
                check, snapshot, self.since_full = FULL, model.snapshot(), 0
        else:
            topic = getattr(op, "topic", None)
            peeked = model.peek(topic, "") if isinstance(topic, str) else None
            outcome = apply_op(model, op)
            if op.kind in STATE_CHANGING:
                self.since_full += 1
                if (
                    self.since_full >= DEFAULT_FULL_CHECK_EVERY
                    or op.kind == "run_retention"
                    or not isinstance(topic, str)
                ):
                    check, snapshot, self.since_full = FULL, model.snapshot(), 0
                else:
                    first = (peeked[0] if peeked else 0) + 1
                    check, topics = (topic, first), [topic]
                    snapshot = model.snapshot(topics=topics, messages_from={topic: first})
        self._expect(outcome, (step.time_s, op, check), snapshot, topics)
        return outcome

    def _expect(self, outcome: Outcome, sent: tuple[int, Any, Any], snapshot: Any, topics: Any):
        self.expected.append((outcome, snapshot, topics))
        self.batch.append(sent)
        if len(self.batch) >= self.batch_steps:
            self._flush()

    def _flush(self) -> None:
        if self.batch:
            self.conn.send_bytes(pickle.dumps(("steps", self.batch), pickle.HIGHEST_PROTOCOL))
            self.in_flight += 1
            self.batch = []
        while self.in_flight > MAX_IN_FLIGHT:
            self._receive()

    def _receive(self) -> None:
        results = pickle.loads(self.conn.recv_bytes())
        self.in_flight -= 1
        for outcome, snapshot in results:
            want_outcome, want_snapshot, topics = self.expected.popleft()
            assert outcome == want_outcome, (want_outcome, outcome)
            if want_snapshot is not None:
                assert _equal(want_snapshot, snapshot, topics), "states differ"


class _End:
    kind = "advance_clock"


_END = _End()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="smoke")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch-steps", type=int, default=64)
    args = parser.parse_args()
    context = mp.get_context("fork")
    parent_end, child_end = context.Pipe()
    child = context.Process(target=_child, args=(child_end,))
    child.start()
    parent = _Parent(parent_end, args.batch_steps)
    parent.run(args.profile, 0)  # warm-up, as rmqsim bench does
    run_seed(args.profile, 0)
    print(f"{args.profile}, seeds 0:{args.seeds}, {args.batch_steps} steps per batch")
    for _ in range(args.repeats):
        wall = time.perf_counter()
        cpu = time.process_time()
        operations = sum(parent.run(args.profile, seed) for seed in range(args.seeds))
        pipelined_s = time.perf_counter() - wall
        parent_cpu_s = time.process_time() - cpu
        wall = time.perf_counter()
        lockstep_ops = sum(run_seed(args.profile, seed).steps for seed in range(args.seeds))
        lockstep_s = time.perf_counter() - wall
        assert lockstep_ops == operations
        print(
            f"pipelined {operations / pipelined_s:7,.0f} ops/s "
            f"(parent CPU {parent_cpu_s / operations * 1e6:5.1f} µs/op) | "
            f"run_seed {operations / lockstep_s:7,.0f} ops/s"
        )
    parent_end.send_bytes(pickle.dumps(("stop",)))
    child_cpu_s = pickle.loads(parent_end.recv_bytes())
    child.join()
    total = operations * args.repeats + parent.steps  # the warm-up ran last seed's count
    print(f"child CPU ≈{child_cpu_s / total * 1e6:5.1f} µs/op over every run")


if __name__ == "__main__":
    main()
