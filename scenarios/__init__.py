"""Seeded, deterministic simulations (simpy) that emit operations of one vocabulary.

This is a leaf package: it imports nothing of ``model``, ``impl``, ``conformance`` or
``reports`` and speaks plain data (``ops``), which the runner adapts to a queue.

* ``queue``, ``consumer``, ``stream``, ``store`` - one subpackage per layer: its
  operation vocabulary (``ops``), workload recipes (``profiles``) and simulation (``sim``);
  the queue's also its actors, their beliefs (``world``) and Hypothesis strategies;
* ``codec`` - the strict JSON codec every vocabulary declares its operations to (``OpCodec``);
* ``catalog`` - every profile by name, of every layer (``get_profile``, ``queue_profile``);
* ``actors_base``/``names`` - what the layers' actors share, and the name pools.

The names below are looked up when first used (PEP 562), not at the package's import: a
module such as ``rmqsim.scenarios.queue.ops`` is imported by processes that never run a
simulation (a protocol server, started once per open; the ``rmqsim`` command's start), and
this package's ``__init__`` runs before any of its modules. Importing every profile and
``simpy`` here cost such a process ≈ 50 ms of its ≈ 200 ms start.
"""

from __future__ import annotations

import importlib
from typing import Any

#: Where each public name lives.
_HOMES: dict[str, str] = {
    "get_profile": "rmqsim.scenarios.catalog",
    "queue_profile": "rmqsim.scenarios.catalog",
    "ERROR_KINDS": "rmqsim.scenarios.queue.ops",
    "OP_KINDS": "rmqsim.scenarios.queue.ops",
    "OP_TYPES": "rmqsim.scenarios.queue.ops",
    "STATE_CHANGING": "rmqsim.scenarios.queue.ops",
    "AdvanceClock": "rmqsim.scenarios.queue.ops",
    "ArmCrash": "rmqsim.scenarios.queue.ops",
    "CloseReopen": "rmqsim.scenarios.queue.ops",
    "Consume": "rmqsim.scenarios.queue.ops",
    "CrashReopen": "rmqsim.scenarios.queue.ops",
    "CreateGroup": "rmqsim.scenarios.queue.ops",
    "CreateTopic": "rmqsim.scenarios.queue.ops",
    "Delivered": "rmqsim.scenarios.queue.ops",
    "DestroyGroup": "rmqsim.scenarios.queue.ops",
    "DestroyTopic": "rmqsim.scenarios.queue.ops",
    "ExistGroup": "rmqsim.scenarios.queue.ops",
    "GetLatest": "rmqsim.scenarios.queue.ops",
    "Message": "rmqsim.scenarios.queue.ops",
    "Op": "rmqsim.scenarios.queue.ops",
    "OpDecodeError": "rmqsim.scenarios.queue.ops",
    "OpEncodeError": "rmqsim.scenarios.queue.ops",
    "Outcome": "rmqsim.scenarios.queue.ops",
    "Produce": "rmqsim.scenarios.queue.ops",
    "RunRetention": "rmqsim.scenarios.queue.ops",
    "Seek": "rmqsim.scenarios.queue.ops",
    "SeekToLatest": "rmqsim.scenarios.queue.ops",
    "Step": "rmqsim.scenarios.queue.ops",
    "op_from_json": "rmqsim.scenarios.queue.ops",
    "op_to_json": "rmqsim.scenarios.queue.ops",
    "outcome_from_json": "rmqsim.scenarios.queue.ops",
    "outcome_to_json": "rmqsim.scenarios.queue.ops",
    "properties_of": "rmqsim.scenarios.queue.ops",
    "step_from_json": "rmqsim.scenarios.queue.ops",
    "step_to_json": "rmqsim.scenarios.queue.ops",
    "PROFILES": "rmqsim.scenarios.queue.profiles",
    "Profile": "rmqsim.scenarios.queue.profiles",
    "ProfileError": "rmqsim.scenarios.queue.profiles",
    "UnknownProfileError": "rmqsim.scenarios.queue.profiles",
    "resolve": "rmqsim.scenarios.queue.profiles",
    "Simulation": "rmqsim.scenarios.queue.sim",
}

__all__ = [
    "ERROR_KINDS",
    "OP_KINDS",
    "OP_TYPES",
    "PROFILES",
    "STATE_CHANGING",
    "AdvanceClock",
    "ArmCrash",
    "CloseReopen",
    "Consume",
    "CrashReopen",
    "CreateGroup",
    "CreateTopic",
    "Delivered",
    "DestroyGroup",
    "DestroyTopic",
    "ExistGroup",
    "GetLatest",
    "Message",
    "Op",
    "OpDecodeError",
    "OpEncodeError",
    "Outcome",
    "Produce",
    "Profile",
    "ProfileError",
    "RunRetention",
    "Seek",
    "SeekToLatest",
    "Simulation",
    "Step",
    "UnknownProfileError",
    "get_profile",
    "op_from_json",
    "op_to_json",
    "outcome_from_json",
    "outcome_to_json",
    "properties_of",
    "queue_profile",
    "resolve",
    "step_from_json",
    "step_to_json",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
