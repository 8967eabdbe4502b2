"""``rmqsim bench`` runs end to end at a tiny size and prints both ratios. No timing is
asserted: the figures are for the report, not a test."""

from __future__ import annotations

import re

from click.testing import CliRunner

from rmqsim.conformance.bench import run_bench
from rmqsim.conformance.cli import cli


def test_bench_command_prints_ratios() -> None:
    args = ["bench", "--messages", "200", "--repeats", "1", "--lockstep-seeds", "1"]
    result = CliRunner().invoke(cli, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "produce" in result.output and "consume" in result.output
    assert "lockstep" in result.output and "smoke" in result.output and "swarm" in result.output
    # Two raw ratios, then two (vs SUT, vs model) for each of smoke and swarm.
    assert len(re.findall(r"\d+\.\d\dx", result.output)) == 6, result.output


def test_bench_lockstep_cadence_reaches_the_runs(monkeypatch) -> None:
    import rmqsim.conformance.bench_lockstep as bench_lockstep

    cadences: list[int] = []
    real_run_seed = bench_lockstep.run_seed

    def recording_run_seed(*args, **kwargs):
        cadences.append(kwargs["check_every"])
        return real_run_seed(*args, **kwargs)

    monkeypatch.setattr(bench_lockstep, "run_seed", recording_run_seed)
    args = ["bench", "--messages", "100", "--repeats", "1", "--lockstep-seeds", "1"]
    result = CliRunner().invoke(cli, [*args, "--check-every", "1000"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "one-topic checks every 1000 changes" in result.output
    # Warm-up and one measured seed, for smoke and for swarm: all at the asked cadence.
    assert cadences == [1000] * 4
    assert CliRunner().invoke(cli, [*args, "--check-every", "0"]).exit_code == 2


def test_bench_refuses_a_size_that_is_not_whole_batches() -> None:
    result = CliRunner().invoke(cli, ["bench", "--messages", "150"])
    assert result.exit_code == 2


def test_run_bench_measures_both_sides() -> None:
    results = run_bench(100, 1)
    assert [r.name.split()[0] for r in results] == ["produce", "consume"]
    assert all(r.impl_msgs_per_s > 0 and r.raw_msgs_per_s > 0 and r.ratio > 0 for r in results)
