"""``rmqsim gate --jobs N``: the runs, shrinks and crash sweeps in worker processes give
the gate of ``--jobs 1`` (the same summary but for wall times, the same JUnit XML but for
times, byte-identical trace files, the same exit code); the liveness bound holds inside
the workers; an interrupted parallel gate writes what finished and leaves no worker and
no scratch directory behind. Real processes, real signals. (A passing parallel gate exits
0 having run everything: tests/test_install.py's installed gate, ``--jobs 2``.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rmqsim.conformance.running.scratch import WORKDIR_ENV
from tests.gate_outputs import without_times
from tests.signal_impls import ctrl_c_default

ROOT = Path(__file__).resolve().parent.parent
RMQSIM = str(Path(sys.executable).with_name("rmqsim"))
#: A quick killer: fails smoke and digits runs with several anomalies (some shrunk).
MUTANT = "rmqsim.conformance.mutants.milvus:decimal_keys"
DEADLOCK = "rmqsim.conformance.mutants.liveness:last_group_deadlock"
TIMEOUT_S = 300


def _env(workdir: Path) -> dict[str, str]:
    path = os.environ.get("PYTHONPATH")
    pythonpath = f"{ROOT}{os.pathsep}{path}" if path else str(ROOT)
    return dict(os.environ, PYTHONPATH=pythonpath, **{WORKDIR_ENV: str(workdir)})


def _gate(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``rmqsim gate ARGS --out out`` in ``cwd`` (relative paths: the outputs of two
    directories compare equal), with an empty corpus and a scratch root of its own."""
    (cwd / "work").mkdir(parents=True)
    (cwd / "corpus").mkdir()
    return subprocess.run(
        [RMQSIM, "gate", *args, "--corpus", "corpus", "--out", "out"],
        cwd=cwd, env=_env(cwd / "work"), capture_output=True, text=True,
        timeout=TIMEOUT_S, check=False,
    )  # fmt: skip


def _traces(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.glob("*.jsonl"))}


def test_a_parallel_gate_is_the_serial_gate(tmp_path: Path) -> None:
    args = ("--impl", MUTANT, "--profiles", "smoke,digits", "--seeds", "0:4")
    serial = _gate(tmp_path / "j1", *args, "--jobs", "1")
    parallel = _gate(tmp_path / "j2", *args, "--jobs", "2")
    assert serial.returncode == parallel.returncode == 1, (serial.stderr, parallel.stderr)
    out1, out2 = tmp_path / "j1" / "out", tmp_path / "j2" / "out"
    summary, junit = without_times(out1)
    assert summary["status"] == "divergence" and len(summary["failures"]) == 8
    assert sum(f["shrunk_trace"] is not None for f in summary["failures"]) == 5
    assert summary["crash_sweep"]["digits"]["failed"] >= 1
    assert (summary, junit) == without_times(out2)
    traces = _traces(out1)
    assert len(traces) > 8 and any(name.endswith(".shrunk.jsonl") for name in traces)
    assert traces == _traces(out2)
    assert serial.stdout.splitlines()[-1] == parallel.stdout.splitlines()[-1]
    assert list((tmp_path / "j2" / "work").iterdir()) == []


def test_the_liveness_bound_holds_inside_the_workers(tmp_path: Path) -> None:
    """The workers run with the command's --op-timeout-s (1 s), not their default (5 s)."""
    done = _gate(
        tmp_path,
        *("--impl", DEADLOCK, "--profiles", "smoke", "--seeds", "0:2", "--jobs", "2"),
        *("--op-timeout-s", "1", "--no-shrink", "--no-crash-sweep"),
    )
    assert done.returncode == 1, done.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert [f["anomaly"] for f in summary["failures"]][:1] == ["hang"]
    assert "did not return within 1 s" in (tmp_path / "out" / "junit.xml").read_text()


def test_a_worker_ended_by_the_last_resort_is_a_finding(tmp_path: Path) -> None:
    """A call that does not give way ends its worker, as it ends the process with one job:
    exit 1 with the watchdog's message, not an internal error."""
    done = _gate(
        tmp_path,
        *("--impl", "tests.hang_impls:swallows_interrupts", "--op-timeout-s", "0.5"),
        *("--profiles", "smoke", "--seeds", "0:2", "--jobs", "2", "--no-shrink"),
        "--no-crash-sweep",
    )
    assert done.returncode == 1, done.stderr
    assert "create_topic did not return within 0.5 s and did not give way" in done.stderr
    assert done.stderr.splitlines()[-1].startswith("rmqsim: error: a worker process ended")
    assert "internal error" not in done.stderr


def _descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (from /proc)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier}
        found |= frontier
    return found


def _alive(pids: set[int]) -> set[int]:
    alive = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            alive.add(pid)
    return alive


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_an_interrupted_parallel_gate_writes_what_finished_and_leaves_nothing(
    sig: signal.Signals, tmp_path: Path
) -> None:
    workdir, out = tmp_path / "work", tmp_path / "out"
    workdir.mkdir()
    args = [RMQSIM, "gate", "--profiles", "smoke", "--seeds", "0:500", "--jobs", "2"]
    child = subprocess.Popen(
        [*args, "--out", str(out)], cwd=tmp_path, env=_env(workdir),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=ctrl_c_default,
    )  # fmt: skip
    seen: set[str] = set()
    deadline = time.monotonic() + 120
    while len(seen) < 6 and child.poll() is None and time.monotonic() < deadline:
        seen.update(path.name for path in workdir.glob("rmqsim-pool-*/*"))  # runs' dirs
        time.sleep(0.002)
    assert child.poll() is None, "the gate ended before it was signalled"
    workers = _descendants(child.pid)
    assert len(workers) >= 2  # the fork server and its workers
    child.send_signal(sig)
    stdout, stderr = child.communicate(timeout=120)

    assert child.returncode == 128 + sig, (child.returncode, stderr)
    assert stderr.splitlines()[-1] == f"rmqsim: error: interrupted by {sig.name}"
    assert "Traceback" not in stderr
    deadline = time.monotonic() + 10
    while _alive(workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(workers)
    assert list(workdir.iterdir()) == []
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "interrupted" and summary["interrupted_by"] == sig.name
    runs = summary["profiles"]["smoke"]["runs"]
    assert 1 <= runs < 500
    assert f"INTERRUPTED by {sig.name} after {runs} run(s)" in stdout


def test_sweeps_go_to_the_pool_heaviest_first_and_are_reported_in_order() -> None:
    """The heaviest profile's sweep starts first (no worker idles on a long last sweep);
    a profile the gate did not run counts as light; ties keep the given order."""
    from rmqsim.conformance.running.gate import GateResult, sweep_order
    from rmqsim.conformance.running.run import run_seed

    gate = GateResult(impl="rocksmq", seeds=range(0, 2))
    for profile, walls in (("smoke", (1.0, 3.0)), ("swarm", (5.0, 7.0)), ("churn", (2.0,))):
        for seed, wall_s in enumerate(walls):
            result = run_seed(profile, seed, steps=1)
            result.wall_s = wall_s
            gate.add(result)
    assert sweep_order(gate, ["smoke", "churn", "swarm", "crashy"]) == [
        "swarm", "smoke", "churn", "crashy"
    ]
