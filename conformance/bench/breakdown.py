"""Where a lockstep operation's CPU time goes: ``rmqsim bench --breakdown``.

The lockstep runs of a profile are timed twice: once plainly (the CPU time per operation,
``time.process_time``, every thread), once under ``cProfile``. The profile says which
share of the time each part takes; the shares are then scaled to the plain CPU time, so
the parts add up to what an operation costs without a profiler. A part is the time spent
*inside* a group of code, entered from outside it (``pstats``' per-caller times), so
nothing is counted twice:

- ``implementation``: ``impl/`` entered from the harness for an operation, an open, a
  crash or a close (RocksDB's calls included);
- ``model``: ``model/`` entered from the harness for an operation (and ``fork``/``peek``);
- ``comparison: read back``: the implementation's ``snapshot``, asked by the comparison;
- ``comparison: model``: the model's ``snapshot`` and invariant check for a comparison;
- ``comparison: equality``: the rest of the comparison (equality, diffs);
- ``watchdog``: the call bound around every call into the implementation;
- ``trace``: building the result and its trace lines;
- ``simulation``: the scenario (``scenarios/``, simpy) choosing the next operation;
- ``lockstep``: the rest (dispatch, comparing the outcomes, records, fault hook, the run's
  scratch directory and set-up).

A profiler costs more per Python call than per call into C, so the shares lean towards
Python-heavy parts (measured: within a few per cent of a timer around each part); the
total is the unprofiled CPU time.
"""

from __future__ import annotations

import cProfile
import pstats
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from rmqsim.conformance.adapter import DEFAULT_IMPL
from rmqsim.conformance.running.run import run_seed

__all__ = [
    "PARTS",
    "REOPEN_PARTS",
    "Breakdown",
    "attribute",
    "attribute_reopen",
    "measure_breakdown",
    "measure_reopen",
]

#: The parts of a lockstep operation, in table order.
PARTS = (
    "implementation",
    "model",
    "comparison: read back",
    "comparison: model",
    "comparison: equality",
    "watchdog",
    "trace",
    "simulation",
    "lockstep",
)

#: The parts of a crash and reopen of ``impl.RocksMQ`` (``measure_reopen``), in order: by
#: the names of the functions of ``impl/storage.py`` and ``impl/rocksmq.py`` that do them.
REOPEN_PARTS = (
    "crash (freeze, stop RocksDB, thaw)",
    "integrity: check the record",
    "integrity: read-only pre-open",
    "read-write open",
    "integrity: write the record",
    "read the database back",
    "rest",
)

# pstats' key of a function: (file, line, name); a built-in's file is "~".
_Key = tuple[str, int, str]


@dataclass(frozen=True, slots=True)
class Breakdown:
    """CPU microseconds per lockstep operation, by part (``PARTS``)."""

    profile: str
    operations: int
    cpu_us_per_op: float
    parts: dict[str, float]


def _group(key: _Key) -> str:
    """The group of code a function belongs to. An outcome's equality lives with the
    operations (``scenarios/queue/ops.py``) but is the lockstep's comparison of outcomes."""
    path = key[0].replace("\\", "/")
    if path.endswith("/scenarios/queue/ops.py") and key[2] in ("__eq__", "__ne__", "_same_types"):
        return "harness"
    for marker, group in (("/impl/", "impl"), ("/model/", "model"), ("/scenarios/", "sim"),
                          ("/simpy/", "sim"), ("/conformance/running/watchdog.py", "watchdog"),
                          ("/conformance/running/trace.py", "trace"),
                          ("/conformance/running/run_result.py", "trace")):
        if marker in path:
            return group
    return "builtin" if path == "~" else "harness"


def _entered(stats: dict[_Key, Any], group: str) -> dict[_Key, float]:
    """Time spent inside ``group``, by the caller outside it that entered it."""
    entered: dict[_Key, float] = {}
    for key, (_cc, _nc, _tt, _ct, callers) in stats.items():
        if _group(key) != group:
            continue
        for caller, (_ccc, _cnc, _ctt, cct) in callers.items():
            if _group(caller) not in (group, "builtin"):
                entered[caller] = entered.get(caller, 0.0) + cct
    return entered


def _cumulative(stats: dict[_Key, Any], file_suffix: str, name: str) -> float:
    return sum(value[3] for key, value in stats.items()
               if key[2] == name and key[0].replace("\\", "/").endswith(file_suffix))


def _self_time(stats: dict[_Key, Any], group: str) -> float:
    """Own time of ``group``'s functions and of the built-ins they call."""
    total = 0.0
    for key, (_cc, _nc, tt, _ct, callers) in stats.items():
        if _group(key) == group:
            total += tt
        elif _group(key) == "builtin" and callers:
            share = sum(c[3] for caller, c in callers.items() if _group(caller) == group)
            whole = sum(c[3] for c in callers.values())
            total += tt * share / whole if whole else 0.0
    return total


def attribute(stats: dict[_Key, Any]) -> dict[str, float]:
    """Profiled seconds per part (``PARTS``) of ``pstats.Stats(...).stats``; the parts add
    up to the time inside ``run_seed``."""
    total = _cumulative(stats, "/conformance/running/run.py", "run_seed")
    impl = _entered(stats, "impl")
    read_back = sum(t for caller, t in impl.items() if caller[2] == "_read_sut")
    model = _entered(stats, "model")
    compared_model = sum(t for caller, t in model.items()
                         if caller[2] in ("_compare", "_full_check_done", "_resolve_crash"))
    compare = _cumulative(stats, "/conformance/running/lockstep.py", "_compare")
    parts = {
        "implementation": sum(impl.values()) - read_back,
        "model": sum(model.values()) - compared_model,
        "comparison: read back": read_back,
        "comparison: model": compared_model,
        "comparison: equality": max(compare - read_back - compared_model, 0.0),
        "watchdog": _self_time(stats, "watchdog"),
        "trace": _cumulative(stats, "/conformance/running/run_result.py", "build_result"),
        "simulation": _self_time(stats, "sim"),
    }
    parts["lockstep"] = max(total - sum(parts.values()), 0.0)
    return parts


def _run(profile: str, seeds: Iterable[int], impl: str) -> int:
    operations = 0
    for seed in seeds:
        result = run_seed(profile, seed, impl=impl)
        assert result.ok, f"{profile} seed {seed} diverges: measure a conforming SUT"
        operations += result.stats.steps
    return operations


def measure_breakdown(profile: str, seeds: range, impl: str = DEFAULT_IMPL) -> Breakdown:
    """The CPU time per lockstep operation of ``seeds`` of ``profile``, by part."""
    if seeds:
        _run(profile, seeds[:1], impl)  # warm-up: imports, first open, caches
    started = time.process_time()
    operations = _run(profile, seeds, impl)
    cpu_s = time.process_time() - started
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        _run(profile, seeds, impl)
    finally:
        profiler.disable()
    profiled = attribute(pstats.Stats(profiler).stats)  # type: ignore[attr-defined]  # pstats keeps it untyped
    whole = sum(profiled.values()) or 1.0
    cpu_us_per_op = cpu_s / max(operations, 1) * 1e6
    return Breakdown(profile, operations, cpu_us_per_op,
                     {part: cpu_us_per_op * profiled[part] / whole for part in PARTS})


def _named(stats: dict[_Key, Any], file_suffix: str, *names: str) -> float:
    return sum(_cumulative(stats, file_suffix, name) for name in names)


def attribute_reopen(stats: dict[_Key, Any]) -> dict[str, float]:
    """Profiled seconds per part (``REOPEN_PARTS``) of crash-and-reopen loops."""
    storage, rocksmq = "/impl/storage.py", "/impl/rocksmq.py"
    total = _named(stats, storage, "crash") + _named(stats, rocksmq, "open")
    store_open = _named(stats, storage, "open")
    verify = _named(stats, storage, "_verify")
    pre_open = _named(stats, storage, "_check_recovery", "_check_unrecorded")
    record = _named(stats, storage, "_record")
    parts = {
        "crash (freeze, stop RocksDB, thaw)": _named(stats, storage, "crash"),
        "integrity: check the record": verify - pre_open,
        "integrity: read-only pre-open": pre_open,
        "read-write open": store_open - verify - record,
        "integrity: write the record": record,
        "read the database back": _named(stats, rocksmq, "read_database",
                                         "_check_message_bounds"),
    }
    parts["rest"] = max(total - sum(parts.values()), 0.0)
    return parts


def _reopen_loop(path: str, reopens: int) -> None:
    from rmqsim.impl import RocksMQ
    from rmqsim.model.api import MQConfig, ProducerMessage

    mq = RocksMQ.open(path, MQConfig())
    for _ in range(reopens):
        mq.produce("t", [ProducerMessage(b"m")])
        mq.crash()
        mq = RocksMQ.open(path, MQConfig())
    mq.crash()


def measure_reopen(reopens: int = 20) -> tuple[float, dict[str, float]]:
    """CPU ms of one crash and reopen of ``impl.RocksMQ`` (a database of 5 topics, 450
    messages, one message written before each crash), and its parts (``REOPEN_PARTS``)."""
    import tempfile

    from rmqsim.conformance.running.scratch import scratch_root
    from rmqsim.impl import RocksMQ
    from rmqsim.model.api import MQConfig, ProducerMessage

    with tempfile.TemporaryDirectory(prefix="rmqsim-bench-", dir=scratch_root()) as tmp:
        path = f"{tmp}/db"
        mq = RocksMQ.open(path, MQConfig())
        for topic in ("t", "u", "v", "w", "x"):
            mq.create_topic(topic)
            mq.create_consumer_group(topic, "g")
            mq.produce(topic, [ProducerMessage(b"p" * 100)] * 90)
        mq.close()
        _reopen_loop(path, 2)  # warm-up
        started = time.process_time()
        _reopen_loop(path, reopens)
        cpu_ms = (time.process_time() - started) / reopens * 1e3
        profiler = cProfile.Profile()
        profiler.enable()
        try:
            _reopen_loop(path, reopens)
        finally:
            profiler.disable()
    profiled = attribute_reopen(pstats.Stats(profiler).stats)  # type: ignore[attr-defined]  # pstats keeps it untyped
    whole = sum(profiled.values()) or 1.0
    return cpu_ms, {part: cpu_ms * profiled[part] / whole for part in REOPEN_PARTS}
