"""Shrinking passes that know the consumer vocabulary (``scenarios.consumer.ops``).

A consumer trace's steps refer to each other by number: a ``complete`` names its batch by
``seq``, the batch's rank among the client's deliveries since the client (re)started.
Dropping a delivery makes every later ``complete`` of that client name another batch, so
delta debugging, which drops steps blindly, stalls. ``drop_batches`` drops a delivery
together with the completion of its batch and renumbers the later ones. Each candidate is
still re-run and kept only if it fails the same way (``conformance.searching.shrink``). (Refused
send-backs name positions in the batch, not message ids, so dropping a produce renames
nothing: see ``scenarios.consumer.ops.Complete``.)
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from rmqsim.conformance.layer import ShrinkSearch
from rmqsim.scenarios.consumer.ops import (
    Complete,
    ConsumerOp,
    CrashClient,
    CrashQueue,
    Deliver,
    StartClient,
)
from rmqsim.scenarios.queue.ops import Op, Step

__all__ = ["AnyStep", "client_epochs", "drop_batches", "without_batch"]

#: A step of the runs the shrinker cuts: a queue run's or a consumer run's.
AnyStep = Step[Op | ConsumerOp]


#: What a pass needs of the shrink's search (``conformance.searching.shrink``).
Search = ShrinkSearch


#: A batch: (the client, how many times it had started, its seq).
BatchKey = tuple[str, int, int]


def drop_batches(search: Search, steps: tuple[AnyStep, ...]) -> tuple[AnyStep, ...]:
    """Drop one delivered batch at a time, its ``deliver`` and its ``complete``
    together, renumbering the client's later batches."""
    index = 0
    while True:
        batches = _delivered(search, steps)
        if index >= len(batches):
            return steps
        position, key = batches[index]
        found = search.fails(without_batch(steps, position, key, client_epochs(steps)))
        if found is not None:
            steps = found  # the next batch now has this index
        else:
            index += 1


def client_epochs(steps: tuple[AnyStep, ...]) -> list[int]:
    """For each step, how many times its client had (re)started (0 for other steps)."""
    starts: dict[str, int] = {}
    epochs = []
    for step in steps:
        op = step.op
        if isinstance(op, StartClient | CrashClient):
            starts[op.client] = starts.get(op.client, 0) + 1
        elif isinstance(op, CrashQueue):
            starts = {client: count + 1 for client, count in starts.items()}
        client = getattr(op, "client", None)
        epochs.append(starts.get(client, 0) if isinstance(client, str) else 0)
    return epochs


def without_batch(
    steps: tuple[AnyStep, ...], position: int, batch: BatchKey, epochs: list[int]
) -> tuple[AnyStep, ...]:
    """``steps`` without the delivery at ``position`` and the completion of its
    ``batch``; the client's later batches (same start) move down by one."""
    client, epoch, seq = batch
    kept = []
    for index, step in enumerate(steps):
        op = step.op
        if index == position:
            continue
        if isinstance(op, Complete) and op.client == client and epochs[index] == epoch:
            if op.seq == seq:
                continue
            if op.seq > seq:
                step = replace(step, op=replace(op, seq=op.seq - 1))
        kept.append(step)
    return tuple(kept)


def _outcomes(search: Search) -> dict[int, Any]:
    """The model's outcome of each step (by 1-based index) in the search's best run,
    which is the run of the steps a pass holds: passes only ever move to the candidate
    that failed last."""
    if search.best is None:
        return {}
    lines = [json.loads(line) for line in search.best.trace_lines]
    return {line["i"]: line.get("outcome") for line in lines if line.get("type") == "step"}


def _delivered(search: Search, steps: tuple[AnyStep, ...]) -> list[tuple[int, BatchKey]]:
    """``(position, batch)`` of each delivery in ``steps`` that handed out a batch."""
    if not any(isinstance(s.op, Deliver) for s in steps):
        return []
    assert search.best is None or search.best.steps == len(steps), "not the run of steps"
    outcomes = _outcomes(search)
    epochs = client_epochs(steps)
    found = []
    for position, step in enumerate(steps):
        outcome = outcomes.get(position + 1)
        if isinstance(step.op, Deliver) and outcome and outcome.get("value"):
            found.append((position, (step.op.client, epochs[position], outcome["value"][0])))
    return found
