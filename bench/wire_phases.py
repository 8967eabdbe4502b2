"""Where a lockstep run's CPU goes through the wire protocol, phase by phase (issue 34).

    PYTHONPATH=. .venv/bin/python bench/wire_phases.py run 3     # smoke seeds 0:3

runs smoke in process, then through the reference server wrapped by this file
(``serve``): each server process appends its CPU time after its imports and after each
reply to a log (a line per reply survives the SIGKILL of a crash), which is summed per
phase: the interpreter's start and imports, ``hello``, ``open``, the operations, the
snapshots, ``close``. rmqsim's own CPU and the servers' (reaped: ``RUSAGE_CHILDREN``)
are printed beside it. docs/BENCHMARKS.md "The protocol's cost, item by item" reads it.
"""

from __future__ import annotations

import collections
import os
import resource
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["PHASES", "run", "serve"]

PHASES = ("imported", "hello", "open", "snapshot", "close")


def _cpu(who: int = resource.RUSAGE_SELF) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def serve(impl: str, log_path: str) -> int:
    """The reference server for ``impl``, logging ``pid op cpu`` after every reply."""
    from rmqsim.conformance.wire import server

    log = open(log_path, "a", encoding="ascii")  # noqa: SIM115  # open while serving
    log.write(f"{os.getpid()} imported {_cpu():.6f}\n")
    log.flush()

    class Logged(server.Server):
        def _dispatch(self, op: object, request: dict[str, Any]) -> Any:
            self.op_seen = op
            return super()._dispatch(op, request)

        def _write(self, obj: dict[str, Any]) -> None:
            super()._write(obj)
            if "point" not in obj:
                log.write(f"{os.getpid()} {getattr(self, 'op_seen', '?')} {_cpu():.6f}\n")
                log.flush()

    return Logged(impl, sys.stdin.buffer, server.private_stdout()).serve()


def run(seeds: int) -> None:
    from rmqsim.conformance.running.run import run_seed

    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "phases.log"
        impl = "exec:" + shlex.join([sys.executable, __file__, "serve", "rocksmq", str(log)])
        started = _cpu()
        steps = sum(run_seed("smoke", seed).steps for seed in range(seeds))
        in_process = _cpu() - started
        own, children = _cpu(), _cpu(resource.RUSAGE_CHILDREN)
        assert steps == sum(run_seed("smoke", seed, impl=impl).steps for seed in range(seeds))
        own, children = _cpu() - own, _cpu(resource.RUSAGE_CHILDREN) - children
        per_process: dict[str, list[tuple[str, float]]] = collections.defaultdict(list)
        for line in log.read_text().splitlines():
            pid, op, cpu = line.split()
            per_process[pid].append((op, float(cpu)))
    cpu_by: collections.Counter[str] = collections.Counter()
    count: collections.Counter[str] = collections.Counter()
    for rows in per_process.values():
        before = 0.0
        for op, cpu in rows:
            phase = op if op in PHASES else "operations"
            cpu_by[phase] += cpu - before
            count[phase] += 1
            before = cpu
    print(f"{steps} operations; in process {in_process:.3f} s; through the protocol "
          f"{own + children:.3f} s (rmqsim {own:.3f} s, {len(per_process)} servers "
          f"{children:.3f} s); load {os.getloadavg()[0]:.1f}")
    for phase in ("imported", "hello", "open", "operations", "snapshot", "close"):
        if count[phase]:
            print(f"  {phase:<10} {count[phase]:>5} x {cpu_by[phase] / count[phase] * 1e6:>9,.0f}"
                  f" µs = {cpu_by[phase]:.3f} s")


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        sys.exit(serve(sys.argv[2], sys.argv[3]))
    run(int(sys.argv[2]) if len(sys.argv) > 2 else 3)
