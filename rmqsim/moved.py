"""Old import paths that keep working: the modules moved into layer and function
subpackages (docs/ARCHITECTURE.md "Layout") are still importable under their old names, so
a user's code, test or ``--impl MODULE:FACTORY`` written against them runs unchanged.

An old name is the same module object as its new one (``sys.modules`` holds both), so a
monkeypatch through either name is seen through the other.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
from types import ModuleType

__all__ = ["MOVED", "install"]

#: Old module name -> the module's name now.
MOVED: dict[str, str] = {
    "rmqsim.conformance.anomalies": "rmqsim.conformance.reporting.anomalies",
    "rmqsim.conformance.apply": "rmqsim.conformance.running.apply",
    "rmqsim.conformance.bench_data": "rmqsim.conformance.bench.data",
    "rmqsim.conformance.bench_lockstep": "rmqsim.conformance.bench.lockstep",
    "rmqsim.conformance.bench_power": "rmqsim.conformance.bench.power",
    "rmqsim.conformance.bench_raw": "rmqsim.conformance.bench.raw",
    "rmqsim.conformance.bench_stream": "rmqsim.conformance.bench.stream",
    "rmqsim.conformance.bench_wire": "rmqsim.conformance.bench.wire",
    "rmqsim.conformance.consumer_check": "rmqsim.conformance.consumer.check",
    "rmqsim.conformance.consumer_run": "rmqsim.conformance.consumer.run",
    "rmqsim.conformance.corpus": "rmqsim.conformance.running.corpus",
    "rmqsim.conformance.coverage": "rmqsim.conformance.queue.coverage",
    "rmqsim.conformance.crash_rate": "rmqsim.conformance.crashing.crash_rate",
    "rmqsim.conformance.crash_record": "rmqsim.conformance.crashing.crash_record",
    "rmqsim.conformance.crash_sweep": "rmqsim.conformance.crashing.crash_sweep",
    "rmqsim.conformance.deviations": "rmqsim.conformance.reporting.deviations",
    "rmqsim.conformance.fuse_disk": "rmqsim.conformance.crashing.fuse_disk",
    "rmqsim.conformance.fuse_mounts": "rmqsim.conformance.crashing.fuse_mounts",
    "rmqsim.conformance.fuzz_layers": "rmqsim.conformance.searching.fuzz_layers",
    "rmqsim.conformance.gate": "rmqsim.conformance.running.gate",
    "rmqsim.conformance.gate_power": "rmqsim.conformance.crashing.gate_power",
    "rmqsim.conformance.layers.consumer": "rmqsim.conformance.consumer.layer",
    "rmqsim.conformance.layers.queue": "rmqsim.conformance.queue.layer",
    "rmqsim.conformance.layers.store": "rmqsim.conformance.store.layer",
    "rmqsim.conformance.layers.stream": "rmqsim.conformance.stream.layer",
    "rmqsim.conformance.lockstep": "rmqsim.conformance.running.lockstep",
    "rmqsim.conformance.pool": "rmqsim.conformance.running.pool",
    "rmqsim.conformance.power_fuse": "rmqsim.conformance.crashing.power_fuse",
    "rmqsim.conformance.power_loss": "rmqsim.conformance.crashing.power_loss",
    "rmqsim.conformance.power_trace": "rmqsim.conformance.crashing.power_trace",
    "rmqsim.conformance.process_sut": "rmqsim.conformance.running.process_sut",
    "rmqsim.conformance.report": "rmqsim.conformance.reporting.report",
    "rmqsim.conformance.run": "rmqsim.conformance.running.run",
    "rmqsim.conformance.run_result": "rmqsim.conformance.running.run_result",
    "rmqsim.conformance.scratch": "rmqsim.conformance.running.scratch",
    "rmqsim.conformance.shrink": "rmqsim.conformance.searching.shrink",
    "rmqsim.conformance.shrink_budget": "rmqsim.conformance.searching.shrink_budget",
    "rmqsim.conformance.shrink_consumer": "rmqsim.conformance.consumer.shrink",
    "rmqsim.conformance.shrink_merge": "rmqsim.conformance.queue.shrink",
    "rmqsim.conformance.simdisk": "rmqsim.conformance.crashing.simdisk",
    "rmqsim.conformance.statediff": "rmqsim.conformance.running.statediff",
    "rmqsim.conformance.stateful": "rmqsim.conformance.searching.stateful",
    "rmqsim.conformance.steer": "rmqsim.conformance.queue.steer",
    "rmqsim.conformance.trace": "rmqsim.conformance.running.trace",
    "rmqsim.conformance.watchdog": "rmqsim.conformance.running.watchdog",
    "rmqsim.scenarios.actors": "rmqsim.scenarios.queue.actors",
    "rmqsim.scenarios.consumer_ops": "rmqsim.scenarios.consumer.ops",
    "rmqsim.scenarios.consumer_profiles": "rmqsim.scenarios.consumer.profiles",
    "rmqsim.scenarios.consumer_sim": "rmqsim.scenarios.consumer.sim",
    "rmqsim.scenarios.ops": "rmqsim.scenarios.queue.ops",
    "rmqsim.scenarios.profiles": "rmqsim.scenarios.queue.profiles",
    "rmqsim.scenarios.simulation": "rmqsim.scenarios.queue.sim",
    "rmqsim.scenarios.strategies": "rmqsim.scenarios.queue.strategies",
    "rmqsim.scenarios.stream_ops": "rmqsim.scenarios.stream.ops",
    "rmqsim.scenarios.stream_profiles": "rmqsim.scenarios.stream.profiles",
    "rmqsim.scenarios.stream_sim": "rmqsim.scenarios.stream.sim",
    "rmqsim.scenarios.world": "rmqsim.scenarios.queue.world",
}


class _AliasLoader:
    """Loads an old name as the module of its new name. (Import's loader and finder
    protocols are duck-typed: subclassing ``importlib.abc``'s classes would import
    ``importlib.resources`` into every process, ≈ 12 ms of a protocol server's start.)"""

    def __init__(self, new_name: str) -> None:
        self.new_name = new_name

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(self.new_name)

    def exec_module(self, module: ModuleType) -> None:
        """The module ran when its new name was imported."""

    def load_module(self, fullname: str) -> ModuleType:
        """The protocol's older entry (import calls ``create_module`` and ``exec_module``)."""
        return importlib.import_module(self.new_name)


class _MovedFinder:
    """Finds an old name of ``MOVED`` (and nothing else)."""

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        new_name = MOVED.get(fullname)
        if new_name is None:
            return None
        return importlib.util.spec_from_loader(fullname, _AliasLoader(new_name))


def install() -> None:
    """Make the old names importable (once per process)."""
    if not any(isinstance(finder, _MovedFinder) for finder in sys.meta_path):
        sys.meta_path.append(_MovedFinder())
