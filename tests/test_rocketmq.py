"""The real RocketMQ store (``--impl rocketmq-store``: the driver in
impl/external/rocketmq_store/) under the storage layer: the gate passes on it with kill -9
crashes, its seeded bugs are killed by the gate, the finding of docs/FINDINGS.md replays,
and bad input (a JVM that cannot start, a driver not built) is one line. Skipped, with the
reason, where the driver is not built, unless RMQSIM_REQUIRE_ROCKETMQ=1 (CI)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from rmqsim.conformance import adapter
from rmqsim.conformance.adapter import EXTERNAL_DRIVERS, BadImplError, ExternalDriver, load_impl
from rmqsim.conformance.cli.app import cli
from rmqsim.conformance.running.gate import GatePlan, run_profiles
from rmqsim.conformance.running.run import read_run_trace, replay
from rmqsim.scenarios.store.profiles import STORE_GATE_PROFILES

ROOT = Path(__file__).resolve().parents[1]
FINDING = ROOT / "regressions" / "rocketmq" / "put-larger-than-a-file.jsonl"
MUTANTS = "rmqsim.conformance.mutants.rocketmq:"


@pytest.fixture(scope="module", autouse=True)
def built() -> None:
    try:
        adapter.external_driver("rocketmq-store")
    except BadImplError as exc:
        if os.environ.get("RMQSIM_REQUIRE_ROCKETMQ") == "1":
            pytest.fail(str(exc))
        pytest.skip(str(exc))


#: The profile whose gate run (seed 0) the power-loss sweep test's gate makes, and checks
#: (one run, not failed, no listed deviation excusing it): not run twice where FUSE works.
SWEPT_PROFILE = "store-async"


def test_the_gate_passes_on_the_real_store(tmp_path: Path) -> None:
    """Every storage profile's seed 0 passes on the real store, with kill -9 crashes (the
    swept profile's run is the power-loss sweep test's, where that test runs)."""
    from rmqsim.conformance.crashing.fuse_disk import fuse_available

    profiles = tuple(p for p in STORE_GATE_PROFILES
                     if p != SWEPT_PROFILE or fuse_available() is not None)
    gate = run_profiles(GatePlan(profiles, range(0, 1), "rocketmq-store", tmp_path))
    assert gate.ok, [(r.profile, r.anomaly, r.divergence) for r in gate.failures]
    assert {r.profile for r in gate.results} == set(profiles)
    assert sum(r.stats.crashes_injected for r in gate.results if r.stats) > 0  # kill -9s


@pytest.mark.parametrize(("bug", "profile", "anomalies"), [
    ("open_cq_drop", "store", {"offset-mismatch", "get-mismatch"}),
    ("open_retain_forcibly", "store-retention", {"over-retention"}),
])
def test_the_gate_kills_a_seeded_bug_of_the_real_store(bug: str, profile: str,
                                                       anomalies: set[str],
                                                       tmp_path: Path) -> None:
    gate = run_profiles(GatePlan((profile,), range(0, 3), MUTANTS + bug, tmp_path,
                                 until_failure=True, shrink=None))
    assert not gate.ok and gate.failures[0].anomaly in anomalies, gate.failures[:1]


def test_the_finding_replays_on_the_real_store_and_conforms_on_ours() -> None:
    trace = read_run_trace(FINDING)
    found = replay(trace)  # the header's impl: rocketmq-store
    assert found.anomaly == "outcome-mismatch"
    assert found.divergence is not None and "END_OF_FILE" in found.divergence.detail
    assert replay(trace, impl="commitlog-store").ok


def test_a_jvm_that_cannot_start_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA", "/nonexistent/java")
    result = CliRunner().invoke(cli, ["run", "--profile", "store", "--seeds", "0:1",
                                      "--impl", "rocketmq-store"])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("rmqsim: error")]
    assert len(lines) == 1 and "rocketmq-store" in lines[0], result.output
    assert "Traceback" not in result.output


def test_a_driver_not_built_names_its_script(monkeypatch: pytest.MonkeyPatch) -> None:
    driver = EXTERNAL_DRIVERS["rocketmq-store"]
    missing = ExternalDriver(driver.command, "external/rocketmq_store/target/absent.jar",
                             driver.script, driver.needs)
    monkeypatch.setitem(EXTERNAL_DRIVERS, "rocketmq-store", missing)
    with pytest.raises(BadImplError, match=r"build-rocketmq\.sh.*Java 17 and Maven"):
        load_impl("rocketmq-store")


def test_the_power_loss_sweep_through_fuse_shows_only_the_listed_deviations(
        tmp_path: Path) -> None:
    """The gate's power-loss sweep of the real store through FUSE (store-async: the
    refusal to open of docs/FINDINGS.md R4): every failing case is a listed deviation."""
    from tests.fuse_programs import fuse_or_skip

    fuse_or_skip()
    result = CliRunner().invoke(cli, [
        "gate", "--impl", "rocketmq-store", "--profiles", SWEPT_PROFILE, "--seeds", "0:1",
        "--expect", "rocketmq-store", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "summary.json").read_text())
    # The profile's gate run passed outright (test_the_gate_passes_on_the_real_store's part).
    assert summary["profiles"][SWEPT_PROFILE] | {"wall_s": 0} == {
        "runs": 1, "failed": 0, "steps": 200, "wall_s": 0, "anomalies": {}}
    power = summary["power_loss"][SWEPT_PROFILE]
    assert power["cases"] > 20 and power["failed"] > 0  # cut in every cell; R4 shows
    assert summary["deviations"]["seen"].get("unsynced-size-refuses-open", 0) > 0
