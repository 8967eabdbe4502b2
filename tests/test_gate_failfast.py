"""``rmqsim gate --max-failures N`` (conformance/running/failfast.py): a gate on a seeded bug
stops starting work once N failures are known, at the same point of its order whatever
``--jobs`` is, and says what it did not run; a count below 1 is a usage error. (A passing
gate is unaffected: tests/test_mutants.py's canary checks it on the real queue.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from rmqsim.conformance.cli import cli
from rmqsim.conformance.mutants.catalogue import select
from rmqsim.conformance.running.gate import CORPUS_SUITE

#: A seeded bug the smoke and crashy profiles catch on most seeds (a consume that skips a
#: message at a page boundary).
MUTANT = "page-boundary-skip"
#: The small gate's profiles, in its order, and seeds per profile.
PROFILES = ("smoke", "crashy")
SEEDS = 4
#: A small gate: two profiles, four seeds each, no sweeps (the stop among profile runs).
SMALL_GATE = ["gate", "--profiles", ",".join(PROFILES), "--seeds", f"0:{SEEDS}", "--steps",
              "200", "--no-crash-sweep", "--no-power-loss"]


def _gate(out: Path, *args: str, impl: str | None = None) -> tuple[Result, dict[str, Any]]:
    """``rmqsim gate`` in process on ``impl`` (the mutant's by default), its summary; the
    regression corpus is an empty directory (tests/test_corpus.py replays the real one)."""
    impl = impl or select([MUTANT])[0].impl
    corpus = out.parent / "empty-corpus"
    corpus.mkdir(exist_ok=True)
    result = CliRunner().invoke(
        cli, [*SMALL_GATE, "--impl", impl, "--out", str(out), "--corpus", str(corpus), *args])
    summary_file = out / "summary.json"
    return result, json.loads(summary_file.read_text()) if summary_file.exists() else {}


def _runs(summary: dict[str, Any]) -> int:
    """The profile runs of a gate's summary (corpus replays are not counted)."""
    return sum(p["runs"] for name, p in summary["profiles"].items() if name != CORPUS_SUITE)


def _without_times_and_dirs(summary: dict[str, Any], out: Path) -> Any:
    """``summary`` with its wall times dropped and ``out`` spelled ``OUT``: what two gates
    on the same seeds must share."""
    text = json.dumps(summary, sort_keys=True).replace(str(out), "OUT")
    def strip(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: strip(v) for k, v in node.items() if k != "wall_s"}
        return [strip(v) for v in node] if isinstance(node, list) else node
    return strip(json.loads(text))


#: Failures the small gate stops at (``--max-failures``).
STOP_AT = 2


@pytest.fixture(scope="module")
def stopped_gate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Result, dict[str, Any], Path]:
    """The small gate on the mutant with ``--jobs 1 --max-failures 2``: its result, summary
    and output directory (run once: both tests below assert on it)."""
    out = tmp_path_factory.mktemp("failfast") / "one"
    result, summary = _gate(out, "--jobs", "1", "--max-failures", str(STOP_AT))
    return result, summary, out


def test_a_gate_on_a_mutant_stops_after_n_failures_and_says_what_it_did_not_run(
    stopped_gate: tuple[Result, dict[str, Any], Path],
) -> None:
    """With ``--max-failures 2`` the gate stops at the second failure in (profile, seed)
    order: it ran the runs up to it and no other (without the option it runs all
    ``SEEDS * len(PROFILES)``), exits 1, shrinks what it found and says where it stopped
    and what it did not run (terminal, summary.json, JUnit)."""
    stopped, summary, out = stopped_gate
    assert stopped.exit_code == 1, stopped.output
    assert summary["status"] == "divergence" and len(summary["failures"]) == STOP_AT
    last = summary["failures"][-1]  # the runs up to it, and it, ran; no other
    ran = SEEDS * PROFILES.index(last["profile"]) + last["seed"] + 1
    assert _runs(summary) == ran < SEEDS * len(PROFILES)
    assert sum(p["failed"] for p in summary["profiles"].values()) == STOP_AT
    assert all(f["shrunk_steps"] for f in summary["failures"])  # shrunk as usual
    stop = summary["stopped_early"]
    assert stop["max_failures"] == stop["failures"] == STOP_AT
    assert stop["after"] == f"profile run {last['profile']} seed {last['seed']}"
    assert stop["not_run"][0] == f"{SEEDS * len(PROFILES) - ran} profile run(s)"
    assert stop["not_run"][-1] == "the regression corpus replays"
    assert f"stopped early (--max-failures {STOP_AT})" in stopped.output
    junit = (out / "junit.xml").read_text()
    assert 'name="rmqsim.stopped-early"' in junit and "not run: " in junit


def test_the_stop_is_the_same_with_one_or_two_jobs(
    stopped_gate: tuple[Result, dict[str, Any], Path], tmp_path: Path
) -> None:
    """Two workers run ahead of the gate's order; the stop counts only failures whose
    predecessors are done, so the same runs, failures, shrinks, stop and files result as
    with one (``stopped_gate``)."""
    one, by_one, out_one = stopped_gate
    two, by_two = _gate(tmp_path / "two", "--jobs", "2", "--max-failures", str(STOP_AT))
    assert one.exit_code == two.exit_code == 1, (one.output, two.output)
    assert by_one["stopped_early"] is not None
    assert (_without_times_and_dirs(by_one, out_one)
            == _without_times_and_dirs(by_two, tmp_path / "two"))
    files = [sorted(p.name for p in out.iterdir()) for out in (out_one, tmp_path / "two")]
    assert files[0] == files[1]


# A passing gate with --max-failures 1 runs everything: the CI canary's gate on the real
# queue (tests/test_mutants.py, real_queue_canary_gate) runs with it and checks so.


@pytest.mark.parametrize("count", ["0", "-1"])
def test_a_count_below_one_is_a_usage_error(count: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["gate", "--max-failures", count, "--out", str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    assert "--max-failures" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "o" / "summary.json").exists()


def test_the_crash_sweeps_stop_after_the_one_that_reaches_the_count(tmp_path: Path) -> None:
    """A stop among the crash sweeps (``collect_sweeps``'s ``stop``, asked after each in
    profile order): the sweeps after it are neither taken nor left to run (their tasks
    are cancelled)."""
    from concurrent.futures import Future
    from types import SimpleNamespace

    from rmqsim.conformance.running.gate import collect_sweeps

    taken: list[Any] = []
    sweeps = [SimpleNamespace(base=SimpleNamespace(ok=True), name=n) for n in "abcd"]
    futures: list[Future[Any]] = [Future() for _ in sweeps]
    done = iter(sweeps)
    result = collect_sweeps(done, futures, tmp_path, taken.append, stop=lambda: len(taken) == 2)
    assert [s.name for s in result] == [s.name for s in taken] == ["a", "b"]
    assert next(done).name == "c"  # never taken from the results
    assert all(f.cancelled() for f in futures)  # (none had started)
