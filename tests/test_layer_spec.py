"""A run is a typed value: the ``RunSpec`` a trace header serializes is the one parsing the
header gives back, for every built-in layer's profiles and every optional header field;
the registry finds each layer by profile and by header, and a bad header field is a
``TraceFormatError`` naming the file (``rmqsim replay`` exits 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from rmqsim.conformance.cli import cli
from rmqsim.conformance.crashing.crash_record import ArmedCrash
from rmqsim.conformance.layer import (
    HeaderError,
    RunSpec,
    UnknownLayerError,
    layer_for_header,
    layer_for_profile,
)
from rmqsim.conformance.layers import CONSUMER_LAYER, QUEUE_LAYER
from rmqsim.conformance.running.gate import GATE_CONSUMER_PROFILES, GATE_PROFILES
from rmqsim.conformance.running.run import run_seed, spec_for_seed
from rmqsim.conformance.running.trace import dumps
from rmqsim.scenarios.queue.profiles import UnknownProfileError


@pytest.mark.parametrize("profile", GATE_PROFILES + GATE_CONSUMER_PROFILES)
def test_a_runs_header_is_its_spec(profile: str) -> None:
    result = run_seed(profile, 1, steps=5)
    header = json.loads(result.trace_lines[0])
    assert result.spec.to_header() == header
    assert RunSpec.from_header(header) == result.spec
    assert result.profile == profile and result.seed == 1 and result.step_budget == 5
    layer = CONSUMER_LAYER if profile in GATE_CONSUMER_PROFILES else QUEUE_LAYER
    assert layer_for_profile(profile) is layer and layer_for_header(header) is layer
    assert "layer" not in header  # the built-in layers' traces stay as they were


def test_every_optional_field_round_trips() -> None:
    spec = spec_for_seed("crashy", 3, steps=40, crash_rate=0.25).replace(
        open_crash=ArmedCrash("put", 2),
        repro="rmqsim fuzz --seed 3",
        found_on="x:y",
        shrunk_from_steps=40,
        crash_sweep=True,
        final_check=False,
        crash_mode="process",
    )
    header = json.loads(dumps(spec.to_header()))
    assert header["crash_rate"] == 0.25 and header["open_crash"] == {"point": "put", "hit": 2}
    assert header["final_check"] is False and header["crash_mode"] == "process"
    assert RunSpec.from_header(header) == spec
    plain = json.loads(dumps(spec_for_seed("smoke", 0).to_header()))
    absent = {"crash_rate", "crash_mode", "open_crash", "repro", "found_on", "final_check"}
    assert not absent & set(plain)


@pytest.mark.parametrize(
    ("field", "value", "needle"),
    [
        ("final_check", "no", "final_check must be true or false"),
        ("crash_mode", "teleport", "crash_mode must be one of"),
        ("crash_rate", 2, "crash_rate must be in [0, 1]"),
        ("open_crash", {"point": 1}, "open_crash must be {point, hit}"),
        ("steps", "many", "'steps' is wrong"),
        ("crash_sweep", "yes", "'crash_sweep' is wrong"),
    ],
)
def test_a_bad_header_field_is_named(
    tmp_path: Path, field: str, value: object, needle: str
) -> None:
    lines = run_seed("smoke", 0, steps=3).trace_lines
    header = dict(json.loads(lines[0]), **{field: value})
    with pytest.raises(HeaderError, match=needle.replace("[", r"\[")):
        RunSpec.from_header(header)
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(line + "\n" for line in [dumps(header), *lines[1:]]))
    replayed = CliRunner().invoke(cli, ["replay", str(path)])
    assert replayed.exit_code == 2, replayed.output
    assert str(path) in replayed.output and needle in replayed.output


def test_unknown_names_are_refused() -> None:
    with pytest.raises(UnknownProfileError, match="known profiles: smoke"):
        layer_for_profile("no-such-profile")
    with pytest.raises(UnknownLayerError, match="unknown layer 'abacus'"):
        layer_for_header({"type": "header", "layer": "abacus"})
