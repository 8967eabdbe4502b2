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

#: The public names, by the module each lives in (looked up there on first use).
_NAMES_BY_MODULE: dict[str, tuple[str, ...]] = {
    "rmqsim.scenarios.catalog": (
        "get_profile", "queue_profile",
    ),
    "rmqsim.scenarios.queue.ops": (
        "ERROR_KINDS", "OP_KINDS", "OP_TYPES", "STATE_CHANGING", "AdvanceClock", "ArmCrash",
        "CloseReopen", "Consume", "CrashReopen", "CreateGroup", "CreateTopic", "Delivered",
        "DestroyGroup", "DestroyTopic", "ExistGroup", "GetLatest", "Message", "Op",
        "OpDecodeError", "OpEncodeError", "Outcome", "Produce", "RunRetention", "Seek",
        "SeekToLatest", "Step", "op_from_json", "op_to_json", "outcome_from_json",
        "outcome_to_json", "properties_of", "step_from_json", "step_to_json",
    ),
    "rmqsim.scenarios.queue.profiles": (
        "PROFILES", "Profile", "ProfileError", "UnknownProfileError", "resolve",
    ),
    "rmqsim.scenarios.queue.sim": (
        "Simulation",
    ),
}
#: Where each public name lives.
_HOMES: dict[str, str] = {
    name: module for module, names in _NAMES_BY_MODULE.items() for name in names
}
__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
