"""A shrinking pass that merges produces: the queue layer's (``QueueLayer.shrink_passes``;
``conformance.searching.shrink`` runs it after dropping actors and topics, before ddmin).

Some failures need volume, not a particular order: a queue that caps a poll at a few
hundred messages fails only once a group has more than that to read, and a run that built
its backlog from many small produces keeps every one of them through delta debugging
(each is needed for the count). ``merge_produces`` tries, in this order and keeping each
candidate only if it still fails the same way:

1. every produce to one topic merged into the first produce to it (messages in order);
2. each run of adjacent produces to one topic merged into one;
3. no payload variety: every produced message an empty payload without properties.

A merged produce is one operation, so the steps left to delta debugging are few and
each candidate run is short.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from rmqsim.conformance.layer import ShrinkSearch
from rmqsim.scenarios.queue.ops import Message, Produce, Step

__all__ = ["merge_produces", "merged_by_topic", "merged_runs", "plain_payloads"]

AnyStep = Step[Any]
Search = ShrinkSearch
Steps = tuple[AnyStep, ...]


def merge_produces(search: Search, steps: Steps) -> Steps:
    """Keep each merged or simplified candidate that still fails (see the module)."""
    candidates: tuple[Callable[[Steps], Iterator[Steps]], ...] = (
        merged_by_topic,
        merged_runs,
        plain_payloads,
    )
    for candidates_of in candidates:
        progress = True
        while progress:  # a merge kept renumbers the steps: look again from the start
            progress = False
            for candidate in candidates_of(steps):
                found = search.fails(candidate)
                if found is not None:
                    steps, progress = found, True
                    break
    return steps


def _produce_topic(step: AnyStep) -> str | None:
    return step.op.topic if isinstance(step.op, Produce) else None


def _merged(steps: Steps, indexes: list[int]) -> Steps:
    """``steps`` with the produces at ``indexes`` (one topic) merged into the first."""
    first = steps[indexes[0]]
    assert isinstance(first.op, Produce)
    messages: list[Message] = []
    for index in indexes:
        op = steps[index].op
        assert isinstance(op, Produce)
        messages.extend(op.messages)
    merged = replace(first, op=replace(first.op, messages=tuple(messages)))
    dropped = set(indexes[1:])
    return tuple(
        merged if i == indexes[0] else step for i, step in enumerate(steps) if i not in dropped
    )


def merged_by_topic(steps: Steps) -> Iterator[Steps]:
    """Per topic with two or more produces (first-appearance order): all merged."""
    by_topic: dict[str, list[int]] = {}
    for index, step in enumerate(steps):
        topic = _produce_topic(step)
        if topic is not None:
            by_topic.setdefault(topic, []).append(index)
    for indexes in by_topic.values():
        if len(indexes) >= 2:
            yield _merged(steps, indexes)


def merged_runs(steps: Steps) -> Iterator[Steps]:
    """Each run of two or more adjacent produces to one topic, merged (first run first)."""
    index = 0
    while index < len(steps):
        topic = _produce_topic(steps[index])
        end = index + 1
        while topic is not None and end < len(steps) and _produce_topic(steps[end]) == topic:
            end += 1
        if end - index >= 2:
            yield _merged(steps, list(range(index, end)))
        index = end


def plain_payloads(steps: Steps) -> Iterator[Steps]:
    """Every produced message an empty payload without properties (when any was not)."""
    plain = tuple(
        replace(s, op=replace(s.op, messages=tuple(Message(b"") for _ in s.op.messages)))
        if isinstance(s.op, Produce)
        else s
        for s in steps
    )
    if plain != steps:
        yield plain
