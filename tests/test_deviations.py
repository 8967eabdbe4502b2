"""``--expect``: known deviations as data. A divergence that shows a listed deviation is
counted by name and passes; any other divergence still fails, also beside a listed one;
a malformed profile is one line, exit 2. Shown on the seeded bugs that behave as Milvus
does (``conformance.mutants.milvus``), and on the real Milvus profile's file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from rmqsim.conformance.cli import cli
from rmqsim.conformance.reporting.deviations import load_profile

PROFILE = """
[[deviation]]
name = "group-without-topic"
kind = "intended"
spec = "Operations: create_consumer_group"
why = "does not check that the topic exists"
anomalies = ["error-mismatch"]
operations = ["create_group"]
pattern = "TopicNotFound"

[[deviation]]
name = "positions-in-memory"
spec = "Durability, crash and recovery"
why = "groups live in memory only"
anomalies = ["lost-write", "torn-operation", "position-mismatch"]
every_diff = "^group +\\\\S.*sut='absent'$"
"""
GROUP_WITHOUT_TOPIC = "rmqsim.conformance.mutants.milvus:group_without_topic"
ACK_OFF_BY_ONE = "rmqsim.conformance.mutants.milvus:ack_off_by_one"


@pytest.fixture
def profile(tmp_path: Path) -> Path:
    path = tmp_path / "deviations.toml"
    path.write_text(PROFILE)
    return path


def _run(impl: str, *extra: str) -> tuple[int, str]:
    result = CliRunner().invoke(
        cli, ["run", "--profile", "smoke", "--seeds", "0:4", "--impl", impl, "--no-shrink",
              *extra],
    )  # fmt: skip
    return result.exit_code, result.output


def test_a_listed_deviation_is_expected_and_counted(profile: Path, tmp_path: Path) -> None:
    without = _run(GROUP_WITHOUT_TOPIC, "--out", str(tmp_path / "a"))
    assert without[0] == 1, without[1]  # the same runs fail without the profile
    code, output = _run(GROUP_WITHOUT_TOPIC, "--expect", str(profile), "--out", str(tmp_path))
    assert code == 0, output
    assert "EXPECTED group-without-topic" in output
    assert "0 divergence(s), " in output and "group-without-topic: " in output


def test_an_unlisted_divergence_still_fails(profile: Path, tmp_path: Path) -> None:
    code, output = _run(ACK_OFF_BY_ONE, "--expect", str(profile), "--out", str(tmp_path))
    assert code == 1 and "DIVERGENCE ack-mismatch" in output and "EXPECTED" not in output


def test_the_gate_lists_expected_deviations_and_fails_on_others(
    profile: Path, tmp_path: Path
) -> None:
    args = ["gate", "--profiles", "smoke", "--seeds", "0:3", "--no-crash-sweep", "--jobs", "1"]
    args += ["--corpus", str(tmp_path / "none"), "--expect", str(profile), "--no-shrink"]
    (tmp_path / "none").mkdir()
    passing = CliRunner().invoke(cli, [*args, "--impl", GROUP_WITHOUT_TOPIC, "--out",
                                       str(tmp_path / "pass")])  # fmt: skip
    assert passing.exit_code == 0, passing.output
    assert "ended at listed deviations (group-without-topic: " in passing.output
    summary = json.loads((tmp_path / "pass" / "summary.json").read_text())
    assert summary["status"] == "ok" and summary["failures"] == []
    assert summary["deviations"]["seen"]["group-without-topic"] >= 1
    assert [d["name"] for d in summary["deviations"]["listed"]] == [
        "group-without-topic", "positions-in-memory"]  # fmt: skip
    failing = CliRunner().invoke(cli, [*args, "--impl", ACK_OFF_BY_ONE, "--out",
                                       str(tmp_path / "fail")])  # fmt: skip
    assert failing.exit_code == 1, failing.output


def test_every_difference_must_be_explained(profile: Path) -> None:
    """A group lost beside a message lost is not the listed deviation alone."""
    from rmqsim.conformance.running.lockstep import Divergence
    from rmqsim.conformance.running.statediff import Difference
    from rmqsim.scenarios.queue.ops import CrashReopen, Step

    deviation = load_profile(str(profile)).deviations[1]
    group = Difference("group", "t/g", -1, "absent")
    message = Difference("messages", "t#3", "m", "absent")
    step = Step(0, "a", CrashReopen())
    alone = Divergence("lost-write", 3, step, diffs=[group])
    beside = Divergence("lost-write", 3, step, diffs=[group, message])
    assert deviation.matches(alone) and not deviation.matches(beside)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("not toml [", "cannot read"),
        ("x = 1", "lists no [[deviation]]"),
        ('[[deviation]]\nname = "a"\nspec = "s"\nwhy = "w"\nanomalies = []', "at least one"),
        ('[[deviation]]\nname = "a"\nspec = "s"\nwhy = "w"\nanomalies = ["x"]\npattern = "("',
         "missing ), unterminated"),
    ],
)
def test_a_malformed_profile_is_one_line_exit_2(text: str, says: str, tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    code, output = _run(GROUP_WITHOUT_TOPIC, "--expect", str(path), "--out", str(tmp_path))
    assert code == 2 and says in output and "Traceback" not in output, output


def test_the_milvus_profile_loads() -> None:
    names = [d.name for d in load_profile("milvus").deviations]
    assert "positions-in-memory" in names and len(set(names)) == len(names)
