"""Same seed, same code: the same bytes, across processes whose string hashing differs.

``tests/test_scenarios_sim.py`` shows the operation sequence does not depend on hash
randomisation; this goes further, to what a user keeps: the whole trace of a lockstep run
on the real implementation (header, every outcome, the final state digest) for every gate
profile, a run with seeded crashes, and a shrunk reproducer (shrinking is bounded by work,
so it must land on the same trace in any process, however fast).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_RUNS = """
from rmqsim.conformance.running.gate import GATE_CONSUMER_PROFILES, GATE_PROFILES
from rmqsim.conformance.mutants.catalogue import select
from rmqsim.conformance.running.run import run_seed
from rmqsim.conformance.searching.shrink import shrink_result

for profile in GATE_PROFILES + GATE_CONSUMER_PROFILES:
    result = run_seed(profile, 3)
    print(profile, result.status, result.steps, result.trace_digest)
crashes = run_seed("crashy", 5, crash_rate=0.05)
print("crash-rate", crashes.status, crashes.stats.crashes_injected, crashes.trace_digest)
(mutant,) = select(["hwm-not-persisted"])
failing = run_seed("smoke", 4, impl=mutant.impl, steps=500)
shrunk = shrink_result(failing)
print("shrunk", failing.trace_digest, shrunk.steps, shrunk.trace_digest, shrunk.shrink_stats)
"""


def _run_in_process(hash_seed: str) -> list[str]:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    out = subprocess.run(
        [sys.executable, "-c", _RUNS], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.splitlines()


def test_traces_and_shrunk_traces_are_identical_across_hash_seeds() -> None:
    first, second = _run_in_process("0"), _run_in_process("982451653")
    assert first == second
    runs = [line.split() for line in first[:-2]]
    assert len(runs) >= 9 and all(status == "ok" for _, status, *_ in runs), first
    crash_rate = first[-2].split()
    assert crash_rate[1] == "ok" and int(crash_rate[2]) > 0, crash_rate
    assert first[-1].startswith("shrunk ") and "stopped_by=None" in first[-1]
