"""The kill matrix: run the gate pipeline against each mutant and record how it dies.

For each mutant, ``run_profiles`` (the code ``rmqsim gate`` runs) goes over the standard
profiles and seeds in the gate's order and stops at the first failing run. The record says
which check caught it and with which anomaly, on which profile and seed, how many
operations and seconds the gate spent until then, and how short the failing run shrinks.
The unmodified implementation runs over the same profiles and seeds: a harness that fails
everything would "kill" every mutant, so the matrix only counts when the baseline passes.

The fuzz column (``add_fuzz_column``, ``rmqsim mutants --fuzz``) runs ``rmqsim fuzz`` at its
default profile against each queue-, consumer- and stream-layer mutant (``--layer``):
killed or not, the examples and seconds until the first failing example, the campaign's
CPU seconds and the shrunk program's length.
"""

from __future__ import annotations

import json
import statistics
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmqsim.conformance.adapter import DEFAULT_IMPL, BadImplError
from rmqsim.conformance.crashing.gate_power import GATE_POWER_STEPS, PowerPlan, run_power_sweeps
from rmqsim.conformance.crashing.power_trace import power_anomaly
from rmqsim.conformance.mutants import Mutant
from rmqsim.conformance.running.gate import (
    GATE_CONSUMER_PROFILES,
    GATE_PROFILES,
    GATE_STREAM_PROFILES,
    GatePlan,
    GateResult,
    run_profiles,
    save_failure,
)
from rmqsim.conformance.running.lockstep import Divergence
from rmqsim.conformance.searching.shrink import shrink_and_save
from rmqsim.conformance.searching.shrink_budget import DEFAULT_SHRINK_BUDGET, ShrinkBudget
from rmqsim.conformance.searching.stateful import fuzz
from rmqsim.scenarios.store.profiles import STORE_GATE_PROFILES

__all__ = [
    "FUZZ_LAYERS",
    "KILLED",
    "LAYER_PROFILES",
    "NOT_RUN",
    "STORAGE_BASELINE_IMPL",
    "STORAGE_POWER_STEPS",
    "SURVIVED",
    "FuzzKill",
    "Kill",
    "KillMatrix",
    "add_fuzz_column",
    "check_of",
    "fuzz_mutant",
    "junit_xml",
    "kill_mutant",
    "layer_profiles",
    "matrix_json",
    "run_matrix",
    "write_outputs",
]

#: The gate profiles that exercise each layer: a consumer-layer mutant is only reached
#: through the consumer profiles (the queue profiles never start a push consumer).
LAYER_PROFILES: dict[str, tuple[str, ...]] = {
    "queue": GATE_PROFILES,
    "consumer": GATE_CONSUMER_PROFILES,
    "storage": GATE_PROFILES,
    "stream": GATE_STREAM_PROFILES,
    "store": STORE_GATE_PROFILES,
}
#: A storage mutant dies in a power-loss sweep (``conformance.crashing.gate_power``) of the first
#: seed of each profile, of this many steps (the default gate's), held to the sync
#: promise; its baseline is the correct backend over the same sweeps.
STORAGE_POWER_STEPS = GATE_POWER_STEPS
STORAGE_BASELINE_IMPL = "commitlog"
KILLED = "killed"
SURVIVED = "survived"
NOT_RUN = "not run"


#: The layers ``rmqsim fuzz`` drives (``--layer``; a storage mutant needs a power cut).
FUZZ_LAYERS = ("queue", "consumer", "stream", "store")


@dataclass(slots=True)
class FuzzKill:
    """How one mutant fared against ``rmqsim fuzz`` at its default profile."""

    status: str  # KILLED | SURVIVED | NOT_RUN
    #: Examples and wall seconds until the first failing example (killed), or of the
    #: whole campaign (survived); CPU seconds of the whole campaign, shrinking included.
    examples: int = 0
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    anomaly: str | None = None
    shrunk_steps: int | None = None
    trace: str | None = None
    repro: str | None = None
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "examples": self.examples,
            "seconds": round(self.seconds, 3),
            "cpu_seconds": round(self.cpu_seconds, 3),
            "anomaly": self.anomaly,
            "shrunk_steps": self.shrunk_steps,
            "trace": self.trace,
            "repro": self.repro,
            "note": self.note,
        }


@dataclass(slots=True)
class Kill:
    """How one mutant fared against the gate."""

    mutant: Mutant
    status: str  # KILLED | SURVIVED | NOT_RUN
    runs: int = 0
    #: Operations and seconds the gate spent up to and including the killing run.
    operations: int = 0
    seconds: float = 0.0
    profile: str | None = None
    seed: int | None = None
    anomaly: str | None = None
    check: str | None = None
    #: The step of the killing run at which it diverged.
    step: int | None = None
    detail: str = ""
    repro: str | None = None
    trace: str | None = None
    #: Operations in the shrunk reproducer (None: not shrunk).
    shrunk_steps: int | None = None
    shrunk_trace: str | None = None
    note: str = ""
    #: The fuzz column (None: not asked for).
    fuzz: FuzzKill | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "mutant": self.mutant.name,
            "bug_class": self.mutant.bug_class,
            "layer": self.mutant.layer,
            "impl": self.mutant.impl,
            "summary": self.mutant.summary,
            "status": self.status,
            "runs": self.runs,
            "operations": self.operations,
            "seconds": round(self.seconds, 3),
            "profile": self.profile,
            "seed": self.seed,
            "anomaly": self.anomaly,
            "check": self.check,
            "step": self.step,
            "detail": self.detail,
            "repro": self.repro,
            "trace": self.trace,
            "shrunk_steps": self.shrunk_steps,
            "shrunk_trace": self.shrunk_trace,
            "note": self.note,
            "fuzz": self.fuzz.to_json() if self.fuzz is not None else None,
        }


@dataclass(slots=True)
class KillMatrix:
    """Every mutant's record, and the unmodified implementation over the same seeds."""

    seeds: range
    profiles: tuple[str, ...]
    kills: list[Kill]
    baseline: GateResult | None

    @property
    def ran(self) -> list[Kill]:
        return [kill for kill in self.kills if kill.status != NOT_RUN]

    @property
    def killed(self) -> list[Kill]:
        return [kill for kill in self.kills if kill.status == KILLED]

    @property
    def baseline_ok(self) -> bool:
        return self.baseline is not None and self.baseline.ok

    @property
    def ok(self) -> bool:
        """Every runnable mutant killed, and the unmodified implementation passes."""
        return self.baseline_ok and len(self.killed) == len(self.ran)

    def seconds_to_kill(self) -> list[float]:
        return [kill.seconds for kill in self.killed]

    def fuzz_summary(self) -> dict[str, Any] | None:
        """The fuzz column's totals (None when it was not run)."""
        ran = [kill.fuzz for kill in self.kills if kill.fuzz and kill.fuzz.status != NOT_RUN]
        if not ran:
            return None
        killed = [fuzz for fuzz in ran if fuzz.status == KILLED]
        return {
            "run": len(ran),
            "killed": len(killed),
            "gate_killed_of_those": sum(
                1 for k in self.kills if k.fuzz in ran and k.status == KILLED
            ),
            "median_seconds_to_kill": round(statistics.median(f.seconds for f in killed), 3)
            if killed
            else None,
            "cpu_seconds": round(sum(fuzz.cpu_seconds for fuzz in ran), 3),
        }

    def summary(self) -> dict[str, Any]:
        seconds = self.seconds_to_kill()
        shrunk = [k.shrunk_steps for k in self.killed if k.shrunk_steps is not None]
        return {
            "mutants": len(self.kills),
            "run": len(self.ran),
            "killed": len(self.killed),
            "median_seconds_to_kill": round(statistics.median(seconds), 3) if seconds else None,
            "max_seconds_to_kill": round(max(seconds), 3) if seconds else None,
            "max_shrunk_steps": max(shrunk) if shrunk else None,
            "baseline": "pass" if self.baseline_ok else "fail" if self.baseline else "not run",
        }


def check_of(divergence: Divergence) -> str:
    """Which of the lockstep's checks raised ``divergence``."""
    if divergence.anomaly == "unrecoverable":
        return "reopen"
    if divergence.anomaly == "hang":
        return "liveness"
    if divergence.anomaly == "torn-operation" or "crash recovery" in divergence.detail:
        return "crash recovery"
    if divergence.expected is not None or divergence.actual is not None:
        return "outcome"
    if divergence.detail.startswith("snapshot() raised"):
        return "snapshot"
    if divergence.step.op.kind in ("crash_reopen", "close_reopen"):
        return "state after reopen"
    return "final state" if divergence.detail == "final state" else "state"


def kill_mutant(
    mutant: Mutant,
    seeds: range,
    *,
    out: Path,
    profiles: Sequence[str] | None = None,
    steps: int | None = None,
    shrink: ShrinkBudget | None = DEFAULT_SHRINK_BUDGET,
) -> Kill:
    """Run the gate against ``mutant`` until its first failing run; shrink that run.

    ``profiles`` defaults to the gate profiles of the mutant's layer (``LAYER_PROFILES``).
    """
    if mutant.layer not in LAYER_PROFILES:
        return Kill(mutant, NOT_RUN, note=f"{mutant.layer} layer: no gate profiles exercise it")
    if profiles is None:
        profiles = LAYER_PROFILES[mutant.layer]
    out_dir = out / mutant.name
    if mutant.layer == "storage":
        return _kill_by_power_loss(mutant, seeds.start, tuple(profiles), out_dir, shrink)
    try:
        kill = _kill_by_gate(mutant, seeds, tuple(profiles), out_dir, steps, shrink)
    except BadImplError as exc:  # a driver that is not built: said, not run
        return Kill(mutant, NOT_RUN, note=str(exc))
    if mutant.layer == "store" and kill.status == SURVIVED:
        _kill_by_store_power(kill, seeds.start, tuple(profiles))
    return kill


def _kill_by_gate(
    mutant: Mutant, seeds: range, profiles: tuple[str, ...], out_dir: Path, steps: int | None,
    shrink: ShrinkBudget | None,
) -> Kill:
    """The gate's profile runs against ``mutant`` until the first failing one, shrunk."""
    gate = run_profiles(
        GatePlan(tuple(profiles), seeds, mutant.impl, out_dir, steps, until_failure=True,
                 crash_mode=mutant.crash_mode)
    )
    kill = Kill(
        mutant,
        SURVIVED,
        runs=len(gate.results),
        operations=sum(result.steps for result in gate.results),
        seconds=sum(result.wall_s for result in gate.results),
    )
    if gate.ok:
        return kill
    failure = gate.failures[0]
    divergence = failure.divergence
    assert divergence is not None, failure
    kill.status = KILLED
    kill.profile, kill.seed, kill.anomaly = failure.profile, failure.seed, failure.anomaly
    kill.check = check_of(divergence)
    kill.step = divergence.step_index
    kill.detail = divergence.detail
    kill.repro = failure.repro_command()
    kill.trace = str(failure.trace_path) if failure.trace_path else None
    if shrink is not None:
        shrunk = shrink_and_save(failure, impl=mutant.impl, budget=shrink)
        if shrunk is not None:
            kill.shrunk_steps = shrunk.steps
            kill.shrunk_trace = str(shrunk.trace_path)
        elif failure.profile in GATE_CONSUMER_PROFILES:
            kill.note = "not shrunk: a consumer run that fails only at its final check"
    return kill


def _kill_by_store_power(kill: Kill, seed: int, profiles: tuple[str, ...]) -> None:
    """A storage-layer mutant the profile runs missed, against the storage power-loss
    sweeps (``conformance.store.power``) of ``seed``, profile by profile, as the gate
    runs them: in process when its factory takes ``fs=``, else through FUSE (its
    ``FUSE_GATE_PROFILES``, one case per cell; not run where FUSE cannot be used)."""
    from rmqsim.conformance.adapter import load_impl
    from rmqsim.conformance.crashing.power_fuse import FuseUnavailableError
    from rmqsim.conformance.store.power import (
        DEFAULT_STORE_POWER_STEPS,
        FUSE_GATE_PROFILES,
        FUSE_GATE_STEPS,
        store_disk_way,
        store_power_sweep,
        takes_fs,
    )

    in_process = takes_fs(load_impl(kill.mutant.impl).factory)
    try:
        way = store_disk_way(kill.mutant.impl, "fs" if in_process else "fuse")
    except FuseUnavailableError as exc:
        kill.note = f"power loss not run: FUSE cannot be used here: {exc}"
        return
    steps = DEFAULT_STORE_POWER_STEPS if in_process else FUSE_GATE_STEPS
    if not in_process:
        profiles = tuple(p for p in profiles if p in FUSE_GATE_PROFILES)
    for profile in profiles:
        sweep = store_power_sweep(profile, seed, way, impl=kill.mutant.impl,
                                  one_per_cell=not in_process, steps=steps)
        kill.runs += 1
        kill.operations += sweep.steps * max(len(sweep.cases), 1)
        kill.seconds += sweep.wall_s
        failures = _unlisted(sweep.failures, kill.mutant.expect)
        if sweep.base_problem is None and not failures:
            continue
        kill.status, kill.profile, kill.seed, kill.check = KILLED, profile, seed, "power loss"
        first = failures[0] if failures else None
        kill.detail = first.problem if first else (sweep.base_problem or "")
        kill.anomaly = kill.detail.partition(":")[0] if first else "power-cut-before-cut"
        if first is not None:
            kill.step = first.case.step
            kill.repro = (f"rmqsim crash-sweep --profile {profile} --seed {seed} --steps "
                          f"{sweep.steps} --impl {kill.mutant.impl} --case {first.case.spec}")
        return


def _unlisted(failures: list[Any], expect: str | None) -> list[Any]:
    """The failing power-cut cases that show no deviation of ``expect``'s profile."""
    if expect is None:
        return failures
    from rmqsim.conformance.reporting.deviations import load_profile

    profile = load_profile(expect)
    return [f for f in failures if profile.match_power(f) is None]


def _kill_by_power_loss(
    mutant: Mutant, seed: int, profiles: tuple[str, ...], out: Path, shrink: ShrinkBudget | None
) -> Kill:
    """A storage mutant against the power-loss sweeps of ``seed``, profile by profile,
    until one fails (its first failing case is the kill, its trace the reproducer)."""
    kill = Kill(mutant, SURVIVED)
    for profile in profiles:
        plan = PowerPlan(mutant.impl, "sync", out, STORAGE_POWER_STEPS, shrink)
        (sweep,) = run_power_sweeps([profile], seed, plan)
        kill.runs += 1
        kill.operations += sweep.steps * max(len(sweep.cases), 1)
        kill.seconds += sweep.wall_s
        if sweep.ok:
            continue
        kill.status, kill.profile, kill.seed, kill.check = KILLED, profile, seed, "power loss"
        if not sweep.failures:
            kill.anomaly, kill.detail = "power-cut-before-cut", sweep.base_problem or ""
            return kill
        # A cut inside an operation, when there is one, rather than in the first open.
        index = next((i for i, f in enumerate(sweep.failures) if f.case.step), 0)
        first = sweep.failures[index]
        kill.anomaly, kill.detail = power_anomaly(first.problem), first.problem
        kill.step = first.case.step
        kill.trace = str(sweep.trace_paths[index])
        kill.repro = f"rmqsim replay {kill.trace}"
        if sweep.shrunk is not None:
            kill.shrunk_trace, kill.shrunk_steps = str(sweep.shrunk[0]), sweep.shrunk[1]
        return kill
    return kill


def fuzz_mutant(
    mutant: Mutant,
    out: Path,
    corpus: Path | None = None,
    *,
    jobs: int = 1,
    first_round: int = 0,
) -> FuzzKill:
    """Run ``rmqsim fuzz`` at its default profile (``corpus``: the regression corpus its
    examples may start from; ``jobs``: worker processes, the same campaign whatever their
    number; ``first_round``: the round to start at, the rounds before it counted as run)
    against ``mutant``; a failure's trace goes under ``out``."""
    if mutant.layer not in FUZZ_LAYERS:
        return FuzzKill(NOT_RUN, note=f"{mutant.layer} layer: no fuzzer drives it")
    campaign = fuzz(
        mutant.impl, layer=mutant.layer, corpus=corpus, jobs=jobs, first_round=first_round
    )
    fuzz_kill = FuzzKill(
        SURVIVED, examples=campaign.examples, seconds=campaign.wall_s, cpu_seconds=campaign.cpu_s
    )
    failure = campaign.failure
    if failure is None:
        return fuzz_kill
    fuzz_kill.status, fuzz_kill.anomaly = KILLED, failure.anomaly
    fuzz_kill.examples, fuzz_kill.seconds = campaign.examples_to_find, campaign.seconds_to_find
    fuzz_kill.shrunk_steps = failure.steps
    fuzz_kill.repro = failure.repro_command()
    out.mkdir(parents=True, exist_ok=True)
    # fuzz-seed0-<anomaly>.jsonl (the queue's), <profile>-seed<S>-<anomaly>.jsonl (others)
    fuzz_kill.trace = str(save_failure(failure, out))
    return fuzz_kill


def add_fuzz_column(
    matrix: KillMatrix,
    out: Path,
    corpus: Path | None = None,
    on_kill: Callable[[Kill], None] | None = None,
) -> None:
    """Fill in every mutant's fuzz column (``fuzz_mutant``); traces under ``out/NAME``."""
    for kill in matrix.kills:
        kill.fuzz = fuzz_mutant(kill.mutant, out / kill.mutant.name, corpus)
        if on_kill is not None:
            on_kill(kill)


def layer_profiles(mutant: Mutant, profiles: Sequence[str]) -> tuple[str, ...]:
    """The profiles of ``profiles`` that reach ``mutant``'s layer: its own layer's (a
    storage mutant's: the queue profiles, swept for power loss), in the order given."""
    from rmqsim.conformance.layer import layer_for_profile

    wanted = "queue" if mutant.layer == "storage" else mutant.layer
    return tuple(name for name in profiles if layer_for_profile(name).name == wanted)


def run_matrix(
    mutants: Sequence[Mutant],
    seeds: range,
    *,
    out: Path,
    profiles: Sequence[str] | None = None,
    steps: int | None = None,
    shrink: ShrinkBudget | None = DEFAULT_SHRINK_BUDGET,
    baseline: bool = True,
    on_kill: Callable[[Kill], None] | None = None,
) -> KillMatrix:
    """Every mutant against the gate, then the unmodified implementation (``baseline``)
    over every profile any of them ran (``profiles``, or those of their layers). Given
    ``profiles``, each mutant runs those that exercise its layer (``layer_profiles``)."""
    kills = []
    for mutant in mutants:
        chosen = None if profiles is None else layer_profiles(mutant, profiles)
        if chosen == ():
            kill = Kill(mutant, NOT_RUN, note=f"none of the profiles {', '.join(profiles or ())} "
                                              f"exercises the {mutant.layer} layer")
        else:
            kill = kill_mutant(mutant, seeds, out=out, profiles=chosen, steps=steps,
                               shrink=shrink)
        kills.append(kill)
        if on_kill is not None:
            on_kill(kill)
    layers = {mutant.layer for mutant in mutants} & set(LAYER_PROFILES)
    swept = list(profiles or LAYER_PROFILES["storage"]) if "storage" in layers else []
    if profiles is None:  # storage mutants need no profile runs of the baseline
        profiles = [p for layer in LAYER_PROFILES if layer in layers - {"storage"}
                    for p in LAYER_PROFILES[layer]]  # fmt: skip
    reference = None
    if baseline:
        reference = run_profiles(
            GatePlan(tuple(profiles), seeds, DEFAULT_IMPL, out / "baseline", steps)
        )
        if swept:  # and the correct file-system backend over their power-loss sweeps
            plan = PowerPlan(STORAGE_BASELINE_IMPL, "sync", out / "baseline-power",
                             STORAGE_POWER_STEPS, None)  # fmt: skip
            reference.power_sweeps = run_power_sweeps(swept, seeds.start, plan)
    return KillMatrix(seeds, tuple(dict.fromkeys([*profiles, *swept])), kills, reference)


def matrix_json(matrix: KillMatrix) -> dict[str, Any]:
    """The matrix as JSON data (what ``kill-matrix.json`` holds)."""
    baseline = matrix.baseline
    return {
        "status": "ok" if matrix.ok else "fail",
        "seeds": [matrix.seeds.start, matrix.seeds.stop],
        "profiles": list(matrix.profiles),
        "summary": matrix.summary(),
        "fuzz_summary": matrix.fuzz_summary(),
        "baseline": None
        if baseline is None
        else {
            "impl": baseline.impl,
            "runs": len(baseline.results),
            "failed": len(baseline.failures),
            "operations": sum(result.steps for result in baseline.results),
            "failures": [result.repro_command() for result in baseline.failures],
            "power_sweeps": len(baseline.power_sweeps),
            "power_failed": sum(not sweep.ok for sweep in baseline.power_sweeps),
        },
        "mutants": [kill.to_json() for kill in matrix.kills],
    }


def junit_xml(matrix: KillMatrix) -> bytes:
    """JUnit XML: one test case per mutant (a survivor fails) and one for the baseline."""
    suite = ET.Element(
        "testsuite",
        name="rmqsim.mutants",
        tests=str(len(matrix.kills) + 1),
        failures=str(len(matrix.ran) - len(matrix.killed) + (0 if matrix.baseline_ok else 1)),
        skipped=str(len(matrix.kills) - len(matrix.ran)),
    )
    for kill in matrix.kills:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"rmqsim.mutants.{kill.mutant.bug_class}",
            name=kill.mutant.name,
            time=f"{kill.seconds:.3f}",
        )
        if kill.status == SURVIVED:
            ET.SubElement(case, "failure", message="survived the gate", type="survivor")
        elif kill.status == NOT_RUN:
            ET.SubElement(case, "skipped", message=kill.note)
    case = ET.SubElement(suite, "testcase", classname="rmqsim.mutants", name="baseline")
    if not matrix.baseline_ok:
        ET.SubElement(case, "failure", message="the unmodified implementation fails the gate")
    ET.indent(suite)
    return ET.tostring(suite, encoding="utf-8", xml_declaration=True)


def write_outputs(matrix: KillMatrix, out: Path) -> tuple[Path, Path]:
    """Write ``kill-matrix.json`` and ``kill-matrix.junit.xml`` under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    data = out / "kill-matrix.json"
    data.write_text(json.dumps(matrix_json(matrix), indent=2, sort_keys=True) + "\n")
    junit = out / "kill-matrix.junit.xml"
    junit.write_bytes(junit_xml(matrix))
    return data, junit
