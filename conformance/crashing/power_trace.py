"""Power-cut traces: a failing storage case (``conformance.crashing.power_loss``) as a file that
``rmqsim replay`` reproduces, and its shrinking.

A power-cut trace is JSON Lines (``trace.dumps``: keys sorted, ASCII):

1. header: ``{"type": "header", "format": "rmqsim-power-trace", "version": 1, "profile",
   "seed", "impl", "promise", "config", "cut": {"point_in_step", "mode"}, "recorded":
   {...}}``; ``cut`` is what the replay does: the power goes out (or the sync fails) at
   the ``point_in_step``-th changing file-system call of the LAST step (of the first open
   when there is no step), in fault mode ``mode``. ``recorded`` is what the run that
   wrote it found (the point's number, call and path, the problem, the anomaly, the cut's
   decisions): for a reader, the replay checks nothing of it but the anomaly it reports;
   an optional ``"geometry"`` (``{"segment_size_bytes", "cq_entries_per_file"}``) is
   the file sizes the sweep chose for the store (``power_loss.SWEEP_GEOMETRY``), given
   again to a backend that takes ``geometry=``;
2. one line per step executed before and up to the cut: ``{"type": "step", "i", "t",
   "actor", "op"}`` (``scenarios.queue.ops`` encodings);
3. end: ``{"type": "end", "steps"}`` (a cut-off file is an error, not a shorter case).

The cut's decisions come from the seed and the point's number in the run, so the same
file gives the same disk after the cut, and the same verdict. The steps run next to the
model exactly as in the sweep. Shrinking (``shrink_power_result``) is
``conformance.searching.shrink``'s search (its public ``shrink_steps``) over these steps: a
candidate keeps the cut in its last step and must fail with the same anomaly.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rmqsim.conformance.crashing.power_loss import (
    PROMISES,
    InProcessAccess,
    PowerFailure,
    PowerSweepResult,
    quiet_recovery,
    run_case,
    storage_factory,
)
from rmqsim.conformance.crashing.simdisk import FAULT_MODES
from rmqsim.conformance.layer import layer_for_profile
from rmqsim.conformance.running.trace import TraceFormatError, dumps, write_lines
from rmqsim.conformance.searching.shrink import shrink_steps, shrunk_path
from rmqsim.conformance.searching.shrink_budget import DEFAULT_SHRINK_BUDGET, ShrinkBudget
from rmqsim.model.api import MQConfig
from rmqsim.scenarios.queue.ops import OpDecodeError, Step, step_from_json, step_to_json

__all__ = [
    "POWER_ANOMALIES",
    "POWER_FORMAT",
    "PowerRun",
    "PowerTrace",
    "is_power_header",
    "parse_power_lines",
    "power_anomaly",
    "power_trace_lines",
    "read_power_trace",
    "run_power_trace",
    "save_failures",
    "shrink_power_trace",
]

POWER_FORMAT = "rmqsim-power-trace"
_VERSION = 1
_HEADER_FIELDS = frozenset({"type", "format", "version", "profile", "seed", "impl", "promise",
                            "config", "cut", "recorded"})
#: Header fields a trace may leave out.
_OPTIONAL_FIELDS = frozenset({"geometry"})
#: A failing case's anomaly, by what its recovery did (``power_anomaly``).
POWER_ANOMALIES = ("power-cut-lost", "power-cut-unrecoverable", "power-cut-unstable",
                   "power-cut-before-cut", "power-cut-not-reached")


def power_anomaly(problem: str) -> str:
    """The anomaly of a case's problem (``power_loss``'s messages): lost or changed state,
    a recovery that fails, a second recovery that differs, a divergence before the cut,
    a cut never reached."""
    if problem.startswith("recovered state is none"):
        return "power-cut-lost"
    if problem.startswith("a second recovery changed"):
        return "power-cut-unstable"
    if problem.startswith(("recovery failed", "a second recovery failed")):
        return "power-cut-unrecoverable"
    if problem.startswith("before the cut"):
        return "power-cut-before-cut"
    return "power-cut-not-reached"


@dataclasses.dataclass(frozen=True, slots=True)
class PowerTrace:
    """A power-cut case: the steps up to the cut and where and how the power goes out."""

    profile: str
    seed: int
    impl: str
    promise: str
    config: MQConfig
    point_in_step: int
    mode: str
    steps: tuple[Step, ...]
    recorded: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: The file sizes the sweep chose (None: the backend's own).
    geometry: dict[str, int] | None = None


@dataclasses.dataclass(slots=True)
class PowerRun:
    """One run of a power-cut trace: the verdict, and the trace of what it ran (with what
    it found as ``recorded``). The attributes ``conformance.searching.shrink``'s search reads of a
    run are here (``steps``, ``anomaly``, ``replay_only``, ``shrink_stats``)."""

    impl: str
    status: str  # "ok" | "divergence"
    steps: int
    anomaly: str | None
    problem: str | None
    trace_lines: list[str]
    wall_s: float = 0.0
    replay_only: bool = True
    shrink_stats: Any = None
    trace_path: Path | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def power_trace_lines(trace: PowerTrace) -> list[str]:
    """The file's lines (module docstring)."""
    header = {
        "type": "header", "format": POWER_FORMAT, "version": _VERSION,
        "profile": trace.profile, "seed": trace.seed, "impl": trace.impl,
        "promise": trace.promise, "config": dataclasses.asdict(trace.config),
        "cut": {"point_in_step": trace.point_in_step, "mode": trace.mode},
        "recorded": trace.recorded,
        **({} if trace.geometry is None else {"geometry": trace.geometry}),
    }  # fmt: skip
    lines = [dumps(header)]
    for index, step in enumerate(trace.steps, start=1):
        encoded = step_to_json(step)
        lines.append(dumps({"type": "step", "i": index, "t": encoded["time_s"],
                            "actor": encoded["actor"], "op": encoded["op"]}))
    lines.append(dumps({"type": "end", "steps": len(trace.steps)}))
    return lines


def run_power_trace(trace: PowerTrace, *, impl: str | None = None) -> PowerRun:
    """Run the case (on ``impl``, default the trace's): it fails with one of
    ``POWER_ANOMALIES`` and the problem, or passes."""
    impl = impl or trace.impl
    access = InProcessAccess(storage_factory(impl), trace.geometry)
    started = time.perf_counter()
    with quiet_recovery():
        problem, cut, fired = run_case(access, trace.config, trace.steps, trace.promise,
                                       (trace.point_in_step, trace.mode), trace.seed,
                                       in_last_step=True)  # fmt: skip
    anomaly = None if problem is None else power_anomaly(problem)
    recorded: dict[str, Any] = {"problem": problem, "anomaly": anomaly, "cut_decisions": cut}
    if fired is not None:
        recorded["point"] = {"index": fired.index, "call": fired.call, "path": fired.path}
    ran = dataclasses.replace(trace, impl=impl, recorded=recorded)
    return PowerRun(impl, "ok" if problem is None else "divergence", len(trace.steps),
                    anomaly, problem, power_trace_lines(ran), time.perf_counter() - started)


def failure_trace(
    failure: PowerFailure, *, profile: str, seed: int, impl: str, promise: str,
    config: MQConfig, steps: Sequence[Step], geometry: dict[str, int] | None = None,
) -> PowerTrace:  # fmt: skip
    """The trace of a sweep's failing case (the steps before its point's step, and it)."""
    case = failure.case
    recorded = {"problem": failure.problem, "cut_decisions": failure.cut,
                "anomaly": power_anomaly(failure.problem),
                "point": {"index": case.point.index, "call": case.point.call,
                          "path": case.point.path}}  # fmt: skip
    return PowerTrace(profile, seed, impl, promise, config, case.point_in_step, case.mode,
                      tuple(steps[: case.step]), recorded, geometry)


def save_power_trace(trace: PowerTrace, path: Path) -> Path:
    write_lines(path, power_trace_lines(trace))
    return path


def is_power_header(first_line: str) -> bool:
    """Whether ``first_line`` (a trace file's first line) is a power-cut trace's header: a
    JSON object whose ``format`` is the power-cut trace's, however it is spaced (a trace
    re-serialised by another tool is still one)."""
    try:
        header = json.loads(first_line)
    except (ValueError, RecursionError):
        return False
    return isinstance(header, dict) and header.get("format") == POWER_FORMAT


def read_power_trace(path: Path) -> PowerTrace:
    """The power-cut trace at ``path``; ``TraceFormatError`` naming the file and line for
    anything malformed (strict: unknown fields, a missing end line, a wrong count)."""
    try:
        lines = path.read_text(encoding="ascii").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceFormatError(path, None, f"cannot be read ({exc})") from None
    return parse_power_lines(path, lines)


def parse_power_lines(path: Path, lines: list[str]) -> PowerTrace:
    """``read_power_trace`` of lines already read from ``path`` (named in errors)."""
    if not lines:
        raise TraceFormatError(path, None, "empty")
    header = _json(path, 1, lines[0])
    trace = _header(path, header)
    steps: list[Step] = []
    for number, raw in enumerate(lines[1:-1], start=2):
        steps.append(_step(path, number, _json(path, number, raw), len(steps) + 1))
    end = _json(path, len(lines), lines[-1]) if len(lines) > 1 else {}
    if end != {"type": "end", "steps": len(steps)}:
        raise TraceFormatError(path, len(lines), f"the last line must be the end line "
                                                 f'{{"type": "end", "steps": {len(steps)}}}')
    return dataclasses.replace(trace, steps=tuple(steps))


def _json(path: Path, number: int, raw: str) -> dict[str, Any]:
    try:
        obj = json.loads(raw)
    except ValueError as exc:
        raise TraceFormatError(path, number, f"not JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise TraceFormatError(path, number, "not a JSON object")
    return obj


def _header(path: Path, header: dict[str, Any]) -> PowerTrace:
    if header.get("format") != POWER_FORMAT or header.get("version") != _VERSION:
        raise TraceFormatError(path, 1, f"not a {POWER_FORMAT} version {_VERSION} header")
    if not _HEADER_FIELDS <= set(header) <= _HEADER_FIELDS | _OPTIONAL_FIELDS:
        raise TraceFormatError(path, 1, f"header fields must be {sorted(_HEADER_FIELDS)} "
                                        f"(and optionally {sorted(_OPTIONAL_FIELDS)})")
    geometry = header.get("geometry")
    if geometry is not None and not (
        isinstance(geometry, dict) and set(geometry) == {"segment_size_bytes",
                                                         "cq_entries_per_file"}
        and all(type(v) is int and v >= 1 for v in geometry.values())
    ):
        raise TraceFormatError(path, 1, "bad header: geometry must be {segment_size_bytes, "
                                        "cq_entries_per_file}, integers >= 1")
    cut = header["cut"]
    try:
        assert_types = (isinstance(header["seed"], int) and isinstance(header["profile"], str)
                        and isinstance(header["impl"], str) and isinstance(cut, dict)
                        and set(cut) == {"point_in_step", "mode"}
                        and isinstance(cut["point_in_step"], int) and cut["point_in_step"] >= 1
                        and cut["mode"] in FAULT_MODES and header["promise"] in PROMISES
                        and isinstance(header["recorded"], dict))
        config = MQConfig(**header["config"])
    except (TypeError, ValueError) as exc:
        raise TraceFormatError(path, 1, f"bad header ({exc})") from None
    if not assert_types:
        raise TraceFormatError(path, 1, "bad header: seed, profile, impl, promise or cut "
                                        "(point_in_step >= 1, a fault mode) is wrong")
    return PowerTrace(header["profile"], header["seed"], header["impl"], header["promise"],
                      config, cut["point_in_step"], cut["mode"], (), header["recorded"],
                      geometry)


def _step(path: Path, number: int, obj: dict[str, Any], index: int) -> Step:
    if set(obj) != {"type", "i", "t", "actor", "op"} or obj["type"] != "step":
        raise TraceFormatError(path, number, "a step line has the fields type, i, t, actor, op")
    if obj["i"] != index:
        raise TraceFormatError(path, number, f"step number {obj['i']!r}, expected {index}")
    try:
        return step_from_json({"time_s": obj["t"], "actor": obj["actor"], "op": obj["op"]})
    except OpDecodeError as exc:
        raise TraceFormatError(path, number, str(exc)) from None


def shrink_power_trace(
    trace: PowerTrace, *, budget: ShrinkBudget = DEFAULT_SHRINK_BUDGET
) -> PowerRun | None:
    """The failing run of the smallest case found that fails like ``trace`` (same
    implementation, same anomaly; the cut stays at the same call of the last step), by
    ``conformance.searching.shrink``'s search; None when ``trace`` does not fail."""
    original = run_power_trace(trace)
    if original.anomaly is None:
        return None

    def run(steps: tuple[Step, ...]) -> PowerRun:
        return run_power_trace(dataclasses.replace(trace, steps=tuple(steps)))

    return shrink_steps(trace.steps, run, original.anomaly, layer_for_profile(trace.profile),
                        budget=budget)  # fmt: skip


def save_failures(
    result: PowerSweepResult, out: Path, *, prefix: str = "",
    shrink: ShrinkBudget | None = DEFAULT_SHRINK_BUDGET,
) -> list[Path]:  # fmt: skip
    """Write the trace of every failing case of ``result`` under ``out``
    (``<prefix><profile>-seed<seed>-power-<point>-<mode>.jsonl``), in
    ``result.trace_paths``; shrink the first case cut inside an operation (the first
    case when none is) within ``shrink`` into ``<stem>.shrunk.jsonl`` beside it
    (``result.shrunk``)."""
    assert result.config is not None, "a sweep that ran records its scenario"
    out.mkdir(parents=True, exist_ok=True)
    for failure in result.failures:
        trace = failure_trace(failure, profile=result.profile, seed=result.seed,
                              impl=result.impl, promise=result.promise, config=result.config,
                              steps=result.recorded, geometry=result.geometry)  # fmt: skip
        name = (f"{prefix}{result.profile}-seed{result.seed}-power-"
                f"{failure.case.point.index}-{failure.case.mode}.jsonl")
        result.trace_paths.append(save_power_trace(trace, out / name))
    if shrink is not None and result.failures:
        index = next((i for i, f in enumerate(result.failures) if f.case.step), 0)
        path = result.trace_paths[index]
        shrunk = shrink_power_trace(read_power_trace(path), budget=shrink)
        if shrunk is not None:
            target = shrunk_path(path)
            write_lines(target, shrunk.trace_lines)
            result.shrunk = (target, shrunk.steps)
    return result.trace_paths
