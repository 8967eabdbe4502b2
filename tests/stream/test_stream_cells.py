"""The stream layer's operation cells (issue 38, docs/STREAM.md "Operation cells"): the
simulation generates every class, each run counts them, the gate reports and steers at
the empty ones, and each new cell family has a mutant only its cells catch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from rmqsim.conformance.cli import cli
from rmqsim.conformance.running.run import RunResult, run_seed
from rmqsim.conformance.stream import gate_hooks as stream_gate_hooks
from rmqsim.conformance.stream.cells import STREAM_CELLS, cells_summary

from . import cell_probe

#: The mutants of the new cell families (docs/STREAM.md "Operation cells").
_NEW_CELL_MUTANTS = (
    "forward-seek-ignored",
    "latest-keeps-existing-group",
    "missing-id-seeks-to-latest",
    "seek-unknown-channel-ignored",
)
_MUTANT_MODULE = "rmqsim.conformance.mutants.stream"


def test_stream_args_hits_every_cell_on_our_streams() -> None:
    """Every cell, on the first three seeds of stream-args (seed 1 completes the set; it
    was seeds 0..19: fewer seeds that must hit them all is the stricter claim)."""
    runs = [run_seed("stream-args", seed) for seed in range(3)]
    assert all(run.ok for run in runs), [run.anomaly for run in runs if not run.ok]
    summary = cells_summary([run.stats.cells for run in runs], len(runs))
    assert summary["never_hit"] == [], summary["never_hit"]
    assert summary["cells"] == {"reachable": len(STREAM_CELLS), "hit": len(STREAM_CELLS)}


def test_the_old_stream_profiles_leave_the_new_cells_empty() -> None:
    """What the issue found: nothing subscribed at LATEST, no seek to a channel not
    consumed (the profiles without the new knobs generate as before)."""
    runs = [run_seed(profile, 0) for profile in ("stream", "stream-seek")]
    summary = cells_summary([run.stats.cells for run in runs], len(runs))
    for cell in ("subscribe-plain/latest-new-group", "seek-plain/unknown-channel",
                 "seek-plain/recreated", "seek-tt/after-consume"):  # fmt: skip
        assert cell in summary["never_hit"]


def _gate(tmp_path: Path, *args: str) -> tuple[int, str, dict]:
    done = CliRunner().invoke(cli, [
        "gate", "--impl", "stream", "--jobs", "1", "--out", str(tmp_path),
        "--corpus", str(tmp_path / "no-corpus"), *args,
    ])  # fmt: skip
    summary = json.loads((tmp_path / "summary.json").read_text())
    return done.exit_code, done.output, summary


def test_the_gate_steers_runs_at_the_empty_stream_cells(tmp_path: Path) -> None:
    (tmp_path / "no-corpus").mkdir()
    code, output, summary = _gate(tmp_path, "--profiles", "stream", "--seeds", "0:2")
    assert code == 0, output
    stream = summary["stream_coverage"]
    assert stream["steered"] > 0 and summary["profiles"]["stream-steer"]["runs"] > 0
    assert stream["never_hit"] == [] and stream["cells"]["hit"] == len(STREAM_CELLS)
    assert f"{len(STREAM_CELLS)} of {len(STREAM_CELLS)} operation/argument cells hit" in output


def test_the_gate_names_the_stream_cells_left_empty(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "no-corpus").mkdir()
    monkeypatch.setattr(stream_gate_hooks, "MAX_STREAM_STEER_RUNS", 0)
    code, output, summary = _gate(tmp_path, "--profiles", "stream", "--seeds", "0:1")
    assert code == 0, output
    never = summary["stream_coverage"]["never_hit"]
    assert "subscribe-plain/latest-new-group" in never
    assert "stream cells never hit: " in output and "seek-plain/unknown-channel" in output


def _impl(mutant: str) -> str:
    return f"{_MUTANT_MODULE}:{mutant.replace('-', '_')}"


def _first_failure(mutant: str, profiles: tuple[str, ...], seeds: range) -> object:
    for profile in profiles:
        for seed in seeds:
            result = run_seed(profile, seed, impl=_impl(mutant))
            if not result.ok:
                return result
    return None


@pytest.mark.parametrize("mutant", _NEW_CELL_MUTANTS)
def test_each_new_cell_mutant_is_caught_by_stream_args(mutant: str) -> None:
    result = _first_failure(mutant, ("stream-args",), range(20))
    assert result is not None, f"{mutant} survived stream-args seeds 0..19"


#: The stream profiles without the new knobs (the default gate's, but stream-args).
_OLD_PROFILES = ("stream", "stream-crashy", "stream-seek", "stream-swarm")


def _probe_run(profile: str, seed: int) -> tuple[RunResult, set[str]]:
    """Our streams' run of ``profile`` and ``seed``, and the new cell mutants whose
    decision would have changed a call of it (``cell_probe``)."""
    cell_probe.TRIPPED.clear()
    result = run_seed(profile, seed, impl=cell_probe.probe_factory)
    return result, set(cell_probe.TRIPPED)


@pytest.mark.slow
def test_each_new_cell_mutant_survives_the_profiles_without_the_new_cells() -> None:
    """Only the new cells catch them: the stream profiles that generate none of them pass
    each mutant on every seed of the default gate (0..19). One probe run per seed serves
    the four (tests/stream/cell_probe.py): where a mutant's decision changes no call, its
    run is our streams' run, which must conform; where it does, the mutant itself runs.
    (Was one run per mutant and seed, 4 x 80.)"""
    live = _probe_run("stream-args", 0)[1]
    assert live == set(_NEW_CELL_MUTANTS), live  # the probe sees each mutant where it acts
    caught: dict[str, list[str]] = {}
    for profile in _OLD_PROFILES:
        for seed in range(20):
            result, tripped = _probe_run(profile, seed)
            assert result.ok, (profile, seed, result.anomaly, result.divergence)
            for mutant in sorted(tripped):
                run = run_seed(profile, seed, impl=_impl(mutant))
                if not run.ok:
                    caught.setdefault(mutant, []).append(f"{profile}:{seed} {run.anomaly}")
    assert caught == {}, caught
