"""The operation vocabulary and its JSON codec; profiles and their JSON form; layering."""

from __future__ import annotations

import base64
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings

from rmqsim.scenarios.catalog import get_profile, queue_profile
from rmqsim.scenarios.consumer.profiles import CONSUMER_PROFILES
from rmqsim.scenarios.queue import ops as ops_module
from rmqsim.scenarios.queue.ops import (
    OP_KINDS,
    OP_TYPES,
    STATE_CHANGING,
    AdvanceClock,
    ArmCrash,
    Consume,
    CreateTopic,
    Delivered,
    Message,
    OpDecodeError,
    OpEncodeError,
    Outcome,
    Produce,
    RunRetention,
    Seek,
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
    CONFIG_KEYS,
    PROFILES,
    Profile,
    ProfileError,
    UnknownProfileError,
    resolve,
)
from rmqsim.scenarios.queue.strategies import ops, outcomes, steps

ROOT = Path(__file__).resolve().parent.parent


def _through_json(obj: object) -> object:
    """What a trace line turns ``obj`` into: dumped as text and loaded back."""
    return json.loads(json.dumps(obj))


# --------------------------------------------------------------------------- vocabulary


def test_kinds_are_the_agreed_strings_in_order() -> None:
    assert OP_KINDS == (
        "create_topic",
        "destroy_topic",
        "create_group",
        "destroy_group",
        "exist_group",
        "produce",
        "consume",
        "seek",
        "seek_to_latest",
        "get_latest",
        "advance_clock",
        "run_retention",
        "crash_reopen",
        "close_reopen",
        "arm_crash",
    )
    for kind, cls in OP_TYPES.items():
        assert cls.kind == kind
    assert frozenset(OP_KINDS) - STATE_CHANGING == {
        "exist_group",
        "get_latest",
        "advance_clock",
        "arm_crash",
    }


def test_ops_are_frozen_slotted_and_hashable() -> None:
    op = Produce("t", (Message(b"x", properties_of({"b": "2", "a": "1"})),))
    assert op.messages[0].properties == (("a", "1"), ("b", "2"))
    assert hash(op) == hash(Produce("t", (Message(b"x", (("a", "1"), ("b", "2"))),)))
    with pytest.raises(dataclasses.FrozenInstanceError):
        op.topic = "u"  # type: ignore[misc]
    assert not hasattr(op, "__dict__")
    assert ArmCrash(3).point is None


def test_message_rejects_non_canonical_properties() -> None:
    with pytest.raises(AssertionError):
        Message(b"", (("b", "1"), ("a", "2")))
    with pytest.raises(AssertionError):
        Message(b"", (("a", "1"), ("a", "2")))


def test_outcome_ok_and_error_shape() -> None:
    assert Outcome().ok
    assert not Outcome(error="TopicNotFound").ok
    assert not Outcome(error="unexpected:KeyError: 'x'").ok  # a runner's non-SPEC error
    with pytest.raises(AssertionError):
        Outcome(value=1, error="TopicNotFound")


def test_outcome_equality_is_type_strict() -> None:
    """``True == 1 == 1.0`` in Python; a queue returning the wrong type must still differ."""
    assert Outcome(value=1) == Outcome(value=1)
    assert Outcome(value=True) != Outcome(value=1)
    assert Outcome(value=5) != Outcome(value=5.0)
    assert Outcome(value=(1, 2)) != Outcome(value=(True, 2))
    assert Outcome(value=(1, 2)) != Outcome(value=[1, 2])
    same = Outcome(value=(Delivered(1, b"a"),))
    assert same == Outcome(value=(Delivered(1, b"a"),))
    assert hash(same) == hash(Outcome(value=(Delivered(1, b"a"),)))
    assert same != Outcome(value=(Delivered(True, b"a"),))
    assert same != Outcome(value=(Delivered(1, bytearray(b"a")),))  # type: ignore[arg-type]
    assert Outcome(error="TopicNotFound") == Outcome(error="TopicNotFound")
    assert Outcome(error="TopicNotFound") != Outcome(error="GroupNotFound")
    assert Outcome() != Outcome(value=False)


# --------------------------------------------------------------------------- codec


@settings(max_examples=300, deadline=None)
@given(ops)
def test_op_json_round_trip(op: object) -> None:
    encoded = op_to_json(op)
    assert op_from_json(_through_json(encoded)) == op
    assert _through_json(encoded) == encoded


@settings(max_examples=200, deadline=None)
@given(outcomes)
def test_outcome_json_round_trip(outcome: Outcome) -> None:
    decoded = outcome_from_json(_through_json(outcome_to_json(outcome)))
    assert decoded == outcome
    assert type(decoded.value) is type(outcome.value)  # bool stays bool, () stays a tuple


@settings(max_examples=100, deadline=None)
@given(steps)
def test_step_json_round_trip(step: Step) -> None:
    assert step_from_json(_through_json(step_to_json(step))) == step


def test_encoding_shapes() -> None:
    op = Produce("t", (Message(b"\x00\xff", (("k", "v"), ("z", ""))), Message(b"")))
    assert op_to_json(op) == {
        "kind": "produce",
        "topic": "t",
        "messages": [
            {"payload": "AP8=", "properties": {"k": "v", "z": ""}},
            {"payload": "", "properties": {}},
        ],
    }
    assert op_to_json(RunRetention()) == {"kind": "run_retention"}
    assert op_to_json(ArmCrash(2, "produce.put")) == {
        "kind": "arm_crash",
        "hit": 2,
        "point": "produce.put",
    }
    delivered = Outcome(value=(Delivered(10, b"a", (("k", "v"),)),))
    assert outcome_to_json(delivered) == {
        "value": [{"msg_id": 10, "payload": "YQ==", "properties": {"k": "v"}}],
        "error": None,
    }
    assert outcome_to_json(Outcome(error="GroupExists")) == {"value": None, "error": "GroupExists"}
    # Properties decode sorted whatever the order of the JSON object.
    decoded = op_from_json(
        {
            "kind": "produce",
            "topic": "t",
            "messages": [{"payload": "", "properties": {"b": "", "a": ""}}],
        }
    )
    assert decoded.messages[0].properties == (("a", ""), ("b", ""))


_GOOD_SEEK = {"kind": "seek", "topic": "t", "group": "g", "msg_id": 5}
_GOOD_PRODUCE = {
    "kind": "produce",
    "topic": "t",
    "messages": [{"payload": "YQ==", "properties": {}}],
}


@pytest.mark.parametrize(
    ("obj", "needle"),
    [
        ([], "expected a JSON object"),
        ({"topic": "t"}, "kind"),
        ({"kind": "nuke"}, "unknown operation kind"),
        ({"kind": 3}, "unknown operation kind"),
        ({"kind": "seek", "topic": "t", "group": "g"}, "msg_id"),
        ({**_GOOD_SEEK, "extra": 1}, "extra"),
        ({**_GOOD_SEEK, "msg_id": True}, "msg_id"),
        ({**_GOOD_SEEK, "msg_id": 5.0}, "msg_id"),
        ({**_GOOD_SEEK, "msg_id": "5"}, "msg_id"),
        ({**_GOOD_SEEK, "topic": None}, "topic"),
        ({**_GOOD_SEEK, "group": b"g"}, "group"),
        ({"kind": "consume", "topic": "t", "group": "g", "n": False}, ".n"),
        ({"kind": "advance_clock", "seconds": 1.5}, "seconds"),
        ({"kind": "arm_crash", "hit": 0, "point": None}, "hit"),
        ({"kind": "arm_crash", "hit": 1}, "point"),
        ({"kind": "arm_crash", "hit": 1, "point": 7}, "point"),
        ({"kind": "run_retention", "topic": "t"}, "topic"),
        ({**_GOOD_PRODUCE, "messages": {}}, "messages"),
        ({**_GOOD_PRODUCE, "messages": [{"payload": "YQ=="}]}, "messages[0]"),
        ({**_GOOD_PRODUCE, "messages": [{"payload": "!!", "properties": {}}]}, "payload"),
        ({**_GOOD_PRODUCE, "messages": [{"payload": "YQ", "properties": {}}]}, "payload"),
        ({**_GOOD_PRODUCE, "messages": [{"payload": "YR==", "properties": {}}]}, "canonical"),
        ({**_GOOD_PRODUCE, "messages": [{"payload": "Y-==", "properties": {}}]}, "payload"),
        ({**_GOOD_PRODUCE, "messages": [{"payload": 1, "properties": {}}]}, "payload"),
        ({**_GOOD_PRODUCE, "messages": [{"payload": "", "properties": []}]}, "properties"),
        ({**_GOOD_PRODUCE, "messages": [{"payload": "", "properties": {"k": 1}}]}, "properties"),
        ({**_GOOD_PRODUCE, "messages": [{"payload": "é", "properties": {}}]}, "payload"),
        ({**_GOOD_PRODUCE, "messages": [{"payload": "", "properties": {1: "v"}}]}, "keys"),
    ],
)
def test_op_decoding_is_strict(obj: object, needle: str) -> None:
    with pytest.raises(OpDecodeError, match=None) as info:
        op_from_json(obj)
    assert needle in str(info.value), str(info.value)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    ("obj", "needle"),
    [
        ({"value": None}, "error"),
        ({"error": None}, "value"),
        ({"value": None, "error": None, "x": 1}, "x"),
        ({"value": 1.5, "error": None}, "outcome.value"),
        ({"value": "x", "error": None}, "outcome.value"),
        ({"value": [1, True], "error": None}, "outcome.value"),
        ({"value": [1, {}], "error": None}, "outcome.value"),
        ({"value": [{"msg_id": 1, "payload": ""}], "error": None}, "properties"),
        ({"value": [{"msg_id": "1", "payload": "", "properties": {}}], "error": None}, "msg_id"),
        ({"value": None, "error": ""}, "outcome.error"),
        ({"value": None, "error": 3}, "outcome.error"),
        ({"value": 1, "error": "TopicNotFound"}, "null when outcome.error"),
    ],
)
def test_outcome_decoding_is_strict(obj: object, needle: str) -> None:
    with pytest.raises(OpDecodeError) as info:
        outcome_from_json(obj)
    assert needle in str(info.value), str(info.value)


def test_step_decoding_is_strict() -> None:
    good = step_to_json(Step(3, "producer-0", CreateTopic("t")))
    assert step_from_json(good) == Step(3, "producer-0", CreateTopic("t"))
    for bad, needle in (
        ({**good, "time_s": True}, "time_s"),
        ({**good, "actor": 1}, "actor"),
        ({k: v for k, v in good.items() if k != "op"}, "op"),
        ({**good, "op": {"kind": "create_topic"}}, "topic"),
    ):
        with pytest.raises(OpDecodeError, match=needle):
            step_from_json(bad)


def test_encoding_rejects_values_outside_the_vocabulary() -> None:
    with pytest.raises(OpEncodeError):
        op_to_json(object())  # type: ignore[arg-type]
    for value in ([1, 2], 1.5, "x", (1, "a"), {"a": 1}, (Delivered(1, b""), 2)):
        with pytest.raises(OpEncodeError):
            outcome_to_json(Outcome(value=value))


def test_base64_is_the_standard_alphabet() -> None:
    payload = bytes(range(256))
    encoded = op_to_json(Produce("t", (Message(payload),)))["messages"][0]["payload"]
    assert encoded == base64.b64encode(payload).decode()
    assert "+" in encoded and "/" in encoded  # not the URL-safe alphabet


def test_codec_never_uses_pickle_or_eval() -> None:
    source = Path(ops_module.__file__).read_text()
    for banned in ("import pickle", "eval(", "exec(", "literal_eval"):
        assert banned not in source


# --------------------------------------------------------------------------- profiles


def test_required_profiles_exist() -> None:
    required = {"smoke", "crashy", "retention", "seek-storm", "churn", "digits", "swarm"}
    assert required <= set(PROFILES)
    for name, profile in PROFILES.items():
        assert profile.name == name
        assert tuple(profile.config) == CONFIG_KEYS


def test_get_profile_unknown_lists_known_names() -> None:
    assert get_profile("smoke") is PROFILES["smoke"]
    with pytest.raises(UnknownProfileError) as info:
        get_profile("smok")
    assert isinstance(info.value, ValueError)
    for name in PROFILES:
        assert name in str(info.value)


def test_the_catalog_finds_both_kinds_and_queue_profile_only_queue_ones() -> None:
    """``get_profile`` knows both tables; ``queue_profile`` refuses a consumer profile by
    name (a queue simulation cannot run one) and an unknown name as get_profile does."""
    assert get_profile("consumer") is CONSUMER_PROFILES["consumer"]
    assert queue_profile("smoke") is PROFILES["smoke"]
    with pytest.raises(ProfileError, match="'consumer' is a consumer profile"):
        queue_profile("consumer")
    with pytest.raises(UnknownProfileError, match="consumer-orderly"):
        queue_profile("smok")


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_profile_json_is_plain_and_round_trips(name: str) -> None:
    for seed in (0, 1):
        profile = resolve(get_profile(name), seed)
        data = profile.to_json()
        text = json.dumps(data, ensure_ascii=True, allow_nan=False)
        assert Profile.from_json(json.loads(text)) == profile
        assert set(data["config"]) == set(CONFIG_KEYS)


def test_profile_validation_names_the_knob() -> None:
    smoke = get_profile("smoke")
    bad = {
        "config": {"page_size_bytes": 1},
        "actors": {**smoke.actors, "clock": 2},
        "weights": {**smoke.weights, "produce": -1},
        "batch_size": (3, 1),
        "topic_names": ("ok", "t/"),
        "invalid_names": ("t",),
        "invalid_fraction": 1.5,
        "poll_sizes": (-1,),
    }
    for knob, value in bad.items():
        with pytest.raises(ProfileError, match=knob.split("_")[0]):
            dataclasses.replace(smoke, **{knob: value})
    with pytest.raises(ProfileError, match="unexpected"):
        Profile.from_json({**smoke.to_json(), "surprise": 1})


def test_profiles_are_hashable_by_content() -> None:
    smoke = get_profile("smoke")
    assert hash(smoke) == hash(Profile.from_json(smoke.to_json()))
    assert len({resolve(get_profile("swarm"), seed) for seed in range(5)}) == 5


def test_profiles_are_immutable() -> None:
    smoke = get_profile("smoke")
    with pytest.raises(TypeError):
        smoke.config["page_size_bytes"] = 1  # type: ignore[index]
    with pytest.raises(TypeError):
        smoke.weights["produce"] = 0  # type: ignore[index]


def test_resolve_is_identity_except_for_swarm() -> None:
    for name, profile in PROFILES.items():
        if name != "swarm":
            assert resolve(profile, 7) is profile
    swarm = get_profile("swarm")
    assert swarm.swarm
    resolved = resolve(swarm, 7)
    assert not resolved.swarm and resolved.name == "swarm"
    assert resolve(swarm, 7) == resolved  # deterministic
    assert resolve(resolved, 7) is resolved  # a resolved profile stays as it is


# --------------------------------------------------------------------------- layering


def test_scenarios_is_a_leaf_package() -> None:
    """Importing every scenarios module pulls in none of model/impl/conformance/reports."""
    code = (
        "import sys, scenarios, scenarios.queue.sim, scenarios.queue.actors, "
        "scenarios.queue.world, rmqsim.scenarios.queue.strategies, scenarios.queue.profiles, "
        "scenarios.names, scenarios.queue.ops, scenarios.consumer.sim, scenarios.stream.sim, "
        "scenarios.store.sim\n"
        "parts = ('model', 'impl', 'conformance', 'reports')\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in parts or "
        "(m.startswith('rmqsim.') and m.split('.')[1] in parts))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "", f"scenarios imported {out.stdout.strip()}"


def test_seek_op_and_clock_op_carry_plain_ints() -> None:
    assert op_to_json(Seek("t", "g", 2**64))["msg_id"] == 2**64
    assert op_from_json({"kind": "advance_clock", "seconds": -3}) == AdvanceClock(-3)
    assert op_from_json({"kind": "consume", "topic": "t", "group": "g", "n": -1}) == Consume(
        "t", "g", -1
    )


def test_the_package_names_each_resolve_on_first_use() -> None:
    """``rmqsim.scenarios``' public names are looked up on first use (PEP 562): each of
    ``__all__`` resolves (to the object of the module it came from: the queue's
    operations, profiles, simulation, the catalog), and an unknown name is an
    AttributeError."""
    import rmqsim.scenarios as package
    from rmqsim.scenarios.catalog import get_profile
    from rmqsim.scenarios.queue.ops import Step
    from rmqsim.scenarios.queue.sim import Simulation

    assert len(package.__all__) == len(set(package.__all__)) >= 40
    for name in package.__all__:
        assert getattr(package, name) is not None, name
    assert (package.Step, package.Simulation, package.get_profile) == (
        Step, Simulation, get_profile)
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = package.no_such_name
