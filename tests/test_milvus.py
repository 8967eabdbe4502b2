"""The real Milvus RocksMQ (Go, pkg/v2 v2.6.6, unmodified) under rmqsim, through its
driver (impl/external/milvus_rocksmq/, built by scripts/build-milvus.sh). Skipped, with
the reason, where the driver is not built, unless RMQSIM_REQUIRE_MILVUS=1 (CI builds it).

Each test is a short program whose outcome on the real code is known: the harness must
find each SPEC-marked Milvus difference, name it as the listed deviation, and find no
difference where Milvus conforms."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from rmqsim.conformance.adapter import DEFAULT_IMPL, EXTERNAL_DRIVERS, BadImplError, load_factory
from rmqsim.conformance.cli import cli
from rmqsim.conformance.reporting.deviations import load_profile
from rmqsim.conformance.running.run import replay_trace
from rmqsim.conformance.running.trace import read_trace
from rmqsim.conformance.wire.check import run_program
from rmqsim.model.api import MQConfig
from rmqsim.scenarios.queue.ops import (
    Consume,
    CrashReopen,
    CreateGroup,
    CreateTopic,
    GetLatest,
    Message,
    Produce,
    Seek,
)

assert "milvus" in EXTERNAL_DRIVERS


def _milvus() -> object:
    try:
        return load_factory("milvus")
    except BadImplError as exc:
        if os.environ.get("RMQSIM_REQUIRE_MILVUS"):
            raise
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def milvus() -> object:
    return _milvus()


CONFIG = MQConfig(page_size_bytes=4, retention_time_s=-1, retention_size_bytes=-1)
MESSAGES = (Message(b"a"), Message(b"b"), Message(b"c"))


def _deviation(milvus: object, ops: list[object], tmp_path: Path) -> str | None:
    divergence, _ = run_program(milvus, ops, CONFIG, tmp_path)  # type: ignore[arg-type]
    assert divergence is not None, "the real Milvus conformed where it is known not to"
    deviation = load_profile("milvus").match(type("R", (), {"divergence": divergence})())
    return None if deviation is None else deviation.name


def test_milvus_conforms_on_a_plain_produce_and_consume(milvus: object, tmp_path: Path) -> None:
    ops = [CreateTopic("t"), Produce("t", MESSAGES), CreateGroup("t", "g"), Consume("t", "g", 2),
           Consume("t", "g", 5), GetLatest("t")]  # fmt: skip
    divergence, points = run_program(milvus, ops, CONFIG, tmp_path)  # type: ignore[arg-type]
    assert divergence is None, divergence
    assert "produce.before_write" in points  # the driver brackets Milvus's RocksDB writes


def test_positions_lost_on_restart_are_found_and_listed(milvus: object, tmp_path: Path) -> None:
    ops = [CreateTopic("t"), CreateGroup("t", "g"), CrashReopen(), GetLatest("t")]
    assert _deviation(milvus, ops, tmp_path) == "positions-in-memory"


def test_a_backward_seek_panic_is_found_and_listed(milvus: object, tmp_path: Path) -> None:
    ops = [CreateTopic("t"), Produce("t", MESSAGES), CreateGroup("t", "g"), Consume("t", "g", 2),
           Seek("t", "g", 1)]  # fmt: skip
    assert _deviation(milvus, ops, tmp_path) == "backward-seek-panics"


def test_a_group_without_its_topic_is_found_and_listed(milvus: object, tmp_path: Path) -> None:
    assert _deviation(milvus, [CreateGroup("absent", "g")], tmp_path) == "group-without-topic"


#: Each finding's trace in regressions/milvus/ (docs/FINDINGS.md) and the listed deviation
#: it shows.
FINDINGS = {
    "ack-off-by-one": "ack-off-by-one",
    "acked-ts-overwritten": "acked-ts-overwritten",
    "backward-seek-panics": "backward-seek-panics",
    "consume-negative-n-check-order": "check-order",
    "consume-negative-n-panics": "consume-negative-n-panics",
    "destroy-group-keeps-acks": "destroy-group-keeps-acks",
    "destroy-topic-keeps-groups": "destroy-keeps-groups",
    "destroy-topic-keeps-messages": "destroy-keeps-messages",
    "destroy-topic-prefix-pages": "destroy-prefix-pages",
    "destroy-topic-torn": "destroy-topic-torn",
    "empty-payload-nil": "empty-payload-nil",
    "group-without-topic": "group-without-topic",
    "ids-restart-after-retention": "ids-restart",
    "key-byte-order-latest": "key-byte-order",
    "latest-of-unknown-topic": "latest-of-unknown-topic",
    "latest-prefix-contains": "latest-prefix-contains",
    "name-dot-unconsumable": "dot-name-unconsumable",
    "name-empty-accepted": "names-unchecked",
    "name-nul-accepted": "names-unchecked",
    "name-too-long-accepted": "names-unchecked",
    "positions-in-memory": "positions-in-memory",
    "produce-in-two-databases": "produce-in-two-databases",
    "properties-dropped": "properties-dropped",
    "retention-torn": "retention-torn",
    "seek-to-latest-absent-topic": "check-order",
}
MILVUS_CORPUS = Path(__file__).resolve().parent.parent / "regressions" / "milvus"


def test_every_finding_is_in_the_corpus_and_the_deviation_list() -> None:
    assert sorted(p.stem for p in MILVUS_CORPUS.glob("*.jsonl")) == sorted(FINDINGS)
    listed = {d.name for d in load_profile("milvus").deviations}
    assert set(FINDINGS.values()) <= listed
    findings = (MILVUS_CORPUS.parent.parent / "docs" / "FINDINGS.md").read_text()
    assert all(f"`{stem}`" in findings or stem in findings for stem in FINDINGS)


@pytest.mark.parametrize("stem", sorted(FINDINGS))
def test_each_finding_reproduces_on_milvus_and_not_on_ours(milvus: object, stem: str) -> None:
    """Replayed on the real Milvus, each trace diverges as recorded and shows its listed
    deviation; replayed on our queue, it conforms (the recorded outcomes are SPEC's)."""
    trace = read_trace(MILVUS_CORPUS / f"{stem}.jsonl")
    on_milvus = replay_trace(trace, impl="milvus")
    assert not on_milvus.ok
    deviation = load_profile("milvus").match(on_milvus)
    assert deviation is not None and deviation.name == FINDINGS[stem], on_milvus.divergence
    assert replay_trace(trace, impl=DEFAULT_IMPL).ok


def test_the_milvus_gate_passes_but_for_its_listed_deviations(
    milvus: object, tmp_path: Path
) -> None:
    """``rmqsim gate --impl milvus --expect milvus`` is green, its summary counting the
    deviations by name; without ``--expect`` the same gate fails."""
    (tmp_path / "corpus").mkdir()
    args = ["gate", "--impl", "milvus", "--profiles", "smoke,crashy", "--seeds", "0:3",
            "--sweep-steps", "8", "--no-shrink", "--jobs", "1",
            "--corpus", str(tmp_path / "corpus")]  # fmt: skip
    expected = CliRunner().invoke(cli, [*args, "--expect", "milvus", "--out", str(tmp_path / "a")])
    assert expected.exit_code == 0, expected.output
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert summary["status"] == "ok" and sum(summary["deviations"]["seen"].values()) > 0
    plain = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "b")])
    assert plain.exit_code == 1, plain.output
