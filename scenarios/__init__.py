"""Seeded, deterministic simulations (simpy) that emit operations of one vocabulary.

This is a leaf package: it imports nothing of ``model``, ``impl``, ``conformance`` or
``reports`` and speaks plain data (``ops``), which the runner adapts to a queue.

* ``ops`` - the operation vocabulary, ``Outcome``, ``Step`` and their strict JSON codec;
* ``codec`` - the strict JSON codec every vocabulary declares its operations to (``OpCodec``);
* ``profiles`` - workload recipes (``PROFILES``, ``resolve``);
* ``catalog`` - every profile by name, queue, consumer or stream (``get_profile``,
  ``queue_profile``);
* ``stream_ops``/``stream_profiles``/``stream_sim`` - the message-stream simulation;
* ``simulation`` - ``Simulation(profile, seed, steps).run(execute)``;
* ``actors``/``world``/``names`` - the simulated clients, their beliefs and name pools.
"""

from rmqsim.scenarios.catalog import get_profile, queue_profile
from rmqsim.scenarios.queue.ops import (
    ERROR_KINDS,
    OP_KINDS,
    OP_TYPES,
    STATE_CHANGING,
    AdvanceClock,
    ArmCrash,
    CloseReopen,
    Consume,
    CrashReopen,
    CreateGroup,
    CreateTopic,
    Delivered,
    DestroyGroup,
    DestroyTopic,
    ExistGroup,
    GetLatest,
    Message,
    Op,
    OpDecodeError,
    OpEncodeError,
    Outcome,
    Produce,
    RunRetention,
    Seek,
    SeekToLatest,
    Step,
    op_from_json,
    op_to_json,
    outcome_from_json,
    outcome_to_json,
    properties_of,
    step_from_json,
    step_to_json,
)
from rmqsim.scenarios.queue.profiles import (
    PROFILES,
    Profile,
    ProfileError,
    UnknownProfileError,
    resolve,
)
from rmqsim.scenarios.queue.sim import Simulation

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
