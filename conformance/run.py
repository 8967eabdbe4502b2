"""Run one seeded scenario (or replay one trace) in lockstep and collect the result.

Everything the trace holds is derived from the seed, the profile and the code; wall time
and temporary paths stay out of it, so the same seed gives a byte-identical trace.
"""

from __future__ import annotations

import functools
import hashlib
import platform
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from conformance.adapter import DEFAULT_IMPL, Factory, resolve_impl
from conformance.lockstep import Divergence, Lockstep, Stats
from conformance.statediff import state_digest
from conformance.trace import FORMAT, FORMAT_VERSION, Trace, TraceFormatError, dumps
from model.api import InvalidArgumentError, MQConfig
from scenarios.ops import Outcome, Step, op_to_json, outcome_to_json
from scenarios.profiles import Profile, get_profile, resolve
from scenarios.simulation import Simulation

#: Packages whose versions go into a trace header (they decide behaviour).
VERSIONED_PACKAGES = ("rmqsim", "rocksdict", "simpy", "hypothesis")


@functools.cache
def versions() -> dict[str, str]:
    """Versions of Python and the packages that decide a run's behaviour."""
    found = {"python": platform.python_version()}
    for name in VERSIONED_PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "absent"
    return found


@functools.cache
def git_commit() -> str | None:
    """The commit of the rmqsim checkout, when it is one (None otherwise)."""
    root = Path(__file__).resolve().parent.parent
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = out.stdout.strip()
    return commit if out.returncode == 0 and len(commit) == 40 else None


@dataclass(slots=True)
class RunResult:
    """The outcome of one run: what a report, a gate or a sweep row needs."""

    profile: str
    seed: int
    impl: str
    status: str  # "ok" | "divergence"
    steps: int
    anomaly: str | None = None
    divergence: Divergence | None = None
    trace_lines: list[str] = field(default_factory=list)
    state_digest: str | None = None
    stats: Stats = field(default_factory=Stats)
    fault_points: dict[str, int] = field(default_factory=dict)
    wall_s: float = 0.0
    sim_time_s: int = 0
    step_budget: int | None = None
    trace_path: Path | None = None
    #: The shrunk reproduction of a failing run, when it was shrunk (``conformance.shrink``).
    shrunk: RunResult | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def trace_digest(self) -> str:
        text = "".join(line + "\n" for line in self.trace_lines)
        return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()

    def repro_command(self) -> str:
        parts = ["rmqsim run", f"--profile {self.profile}", f"--seed {self.seed}"]
        if self.impl != DEFAULT_IMPL:
            parts.append(f"--impl {self.impl}")
        if self.step_budget is not None:
            parts.append(f"--steps {self.step_budget}")
        return " ".join(parts)


def _header(profile: Profile, seed: int, impl: str, steps: int | None) -> dict[str, Any]:
    return {
        "type": "header",
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "seed": seed,
        "profile": profile.name,
        "profile_config": profile.to_json(),
        "config": dict(profile.config),
        "impl": impl,
        "steps": steps,
        "versions": versions(),
        "git_commit": git_commit(),
    }


def _step_line(index: int, step: Step, outcome: Outcome | None, **extra: Any) -> str:
    line: dict[str, Any] = {
        "type": "step",
        "i": index,
        "t": step.time_s,
        "actor": step.actor,
        "op": op_to_json(step.op),
        "outcome": None if outcome is None else _outcome_json(outcome),
    }
    line.update({k: v for k, v in extra.items() if v is not None})
    return dumps(line)


def _outcome_json(outcome: Outcome) -> Any:
    try:
        return outcome_to_json(outcome)
    except (TypeError, ValueError):  # a SUT returned something outside the vocabulary
        return {"unencodable": repr(outcome)[:2000]}


def _lines(lockstep: Lockstep, header: dict[str, Any], end: dict[str, Any]) -> list[str]:
    lines = [dumps(header)]
    for index, record in enumerate(lockstep.records, start=1):
        extra: dict[str, Any] = {"crash": record.crash}
        if record.sut_outcome is not None:
            extra["sut_outcome"] = _outcome_json(record.sut_outcome)
        lines.append(_step_line(index, record.step, record.outcome, **extra))
    lines.append(dumps(end))
    return lines


def _result(
    lockstep: Lockstep,
    header: dict[str, Any],
    divergence: Divergence | None,
    started: float,
    last: Step | None,
) -> RunResult:
    final = None if divergence else state_digest(lockstep.model.snapshot())
    end = {
        "type": "end",
        "steps": lockstep.stats.steps,
        "status": "divergence" if divergence else "ok",
        "anomaly": divergence.anomaly if divergence else None,
        "state_digest": final,
    }
    lines = _lines(lockstep, header, end)
    return RunResult(
        profile=header["profile"],
        seed=header["seed"],
        impl=header["impl"],
        status=end["status"],
        steps=lockstep.stats.steps,
        anomaly=end["anomaly"],
        divergence=divergence,
        trace_lines=lines,
        state_digest=final,
        stats=lockstep.stats,
        fault_points={f"{k}:{p}": n for (k, p), n in lockstep.faults.seen.items()},
        wall_s=time.perf_counter() - started,
        sim_time_s=last.time_s if last else 0,
        step_budget=header.get("steps"),
    )


def _lockstep_run(
    factory: Factory,
    config: MQConfig,
    header: dict[str, Any],
    check_every: int,
    body: Callable[[Lockstep], None],
    workdir: Path | None = None,
) -> RunResult:
    """Run ``body`` on a fresh Lockstep in a temporary directory, finish with the final
    full comparison, always release the SUT, and collect the result."""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="rmqsim-", dir=workdir) as tmp:
        lockstep = Lockstep(factory, config, Path(tmp), check_every=check_every)
        divergence: Divergence | None = None
        try:
            body(lockstep)
            if lockstep.records:
                lockstep.finish(lockstep.stats.steps, lockstep.records[-1].step)
        except Divergence as found:
            divergence = found
        finally:
            lockstep.close()
        last = lockstep.records[-1].step if lockstep.records else None
        return _result(lockstep, header, divergence, started, last)


def run_seed(
    profile_name: str,
    seed: int,
    *,
    impl: str | Factory = DEFAULT_IMPL,
    steps: int | None = None,
    check_every: int = 1,
    workdir: Path | None = None,
) -> RunResult:
    """Run one scenario in lockstep against ``impl`` (``MOD:FACTORY`` or a factory) and
    return its result."""
    profile = resolve(get_profile(profile_name), seed)
    impl, factory = resolve_impl(impl)
    header = _header(profile, seed, impl, steps)

    def body(lockstep: Lockstep) -> None:
        Simulation(profile, seed, steps=steps).run(lockstep.execute)

    return _lockstep_run(factory, MQConfig(**profile.config), header, check_every, body, workdir)


def replay_trace(
    trace: Trace, *, impl: str | Factory | None = None, check_every: int = 1
) -> RunResult:
    """Re-execute a trace on the model and the SUT; every recorded outcome must recur.

    ``impl`` overrides the implementation named in the header.
    """
    impl, factory = resolve_impl(impl or trace.header.get("impl") or DEFAULT_IMPL)
    try:
        config = MQConfig(**trace.header["config"])
    except (TypeError, InvalidArgumentError) as exc:
        raise TraceFormatError(trace.path, 1, f"header config is not an MQConfig: {exc}") from None

    def body(lockstep: Lockstep) -> None:
        for recorded in trace.steps:
            step = Step(recorded.time_s, recorded.actor, recorded.op)
            outcome = lockstep.execute(step)
            if recorded.outcome is not None and recorded.outcome != outcome:
                raise Divergence(
                    "trace-mismatch",
                    recorded.index,
                    step,
                    recorded.outcome,
                    outcome,
                    [],
                    "the model's outcome differs from the one recorded in the trace "
                    "(the trace was written by other code)",
                )

    return _lockstep_run(factory, config, dict(trace.header, impl=impl), check_every, body)
