"""``rmqsim bench --json``: one record per figure, every target with its verdict and no
verdict without a target; the printed verdicts and the records agree; and the history
(``bench/history.jsonl``) is records of the same form."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from rmqsim.conformance.bench.data import RECORD_FIELDS, Figure, verdict_lines
from rmqsim.conformance.bench.speed import REFERENCE_MODEL_OPS_PER_CPU_S
from rmqsim.conformance.cli import cli
from rmqsim.conformance.crashing.power_loss import SweepShape
from tests.fuse_programs import fuse_or_skip
from tests.test_progress_log import TIMING

ROOT = Path(__file__).resolve().parent.parent
HISTORY = ROOT / "bench" / "history.jsonl"
SMALL = ["bench", "--messages", "100", "--repeats", "1", "--lockstep-seeds", "1",
         "--protocol-seeds", "0"]


def _check_record(record: dict[str, Any]) -> None:
    assert tuple(record) == RECORD_FIELDS, record
    assert isinstance(record["value"], int | float) and record["unit"], record
    datetime.fromisoformat(record["date"].replace("Z", "+00:00"))
    if record["target"] is None:
        assert record["met"] is None and record["better"] is None, record
    else:
        higher = record["better"] == "higher"
        assert record["better"] in ("higher", "lower"), record
        expected = record["value"] >= record["target"] if higher else \
            record["value"] <= record["target"]  # fmt: skip
        assert record["met"] is expected, record


def test_figures_meet_their_targets_from_the_right_side() -> None:
    assert Figure("a", 0.6, "x", 0.5).met is True
    assert Figure("a", 0.4, "x", 0.5).verdict() == "MISSED"
    assert Figure("a", 2.0, "x", 3.0, "lower").met is True
    assert Figure("a", 3.5, "x", 3.0, "lower").met is False
    untargeted = Figure("consume", 0.1, "x")
    assert untargeted.met is None and untargeted.verdict() == "-"
    assert verdict_lines([untargeted]) == []
    assert verdict_lines([Figure("lockstep.smoke.ops_per_s", 4256, "ops/s", 10_000)]) == [
        "target lockstep.smoke.ops_per_s >= 10,000 ops/s: 4,256 ops/s, MISSED"
    ]


#: The small bench with every section the tests below look at: each backend, one
#: lockstep seed (smoke, swarm, the stream layer), one step of the power-loss sweep (in
#: process and, where FUSE can be used, through it), the records to standard output and
#: the tables to standard error.
EVERY_SECTION = [*SMALL, "--power-steps", "1", "--json", "-"]

#: The power-loss cases the bench below times: one per cell named (the sweep's
#: ``SweepShape.cells``), 3 where smoke seed 0's first step has 129 (1.3 s each through
#: FUSE on a busy machine), and a cell its first step does not reach (cq-write, from the
#: third on): a sweep of other steps counts another case. The tests look at how the
#: section measures and reports the same cases both ways, not at how many there are; the
#: sweep through FUSE itself is tests/test_power_fuse.py's.
BENCH_POWER_CELLS = frozenset({"segment-append/torn-write", "segment-sync/lose-unsynced",
                               "segment-sync/sync-error", "cq-write/torn-write"})
BENCH_POWER_CASES = 3


def _sweep_of_one_case_per_cell(real_sweep: Callable[..., Any]) -> Callable[..., Any]:
    def sweep(*args: Any, **kwargs: Any) -> Any:
        return real_sweep(*args, **kwargs, shape=SweepShape(cells=BENCH_POWER_CELLS))

    return sweep


@pytest.fixture(scope="module")
def small_bench() -> Result:
    """One run of ``EVERY_SECTION`` with standard output not a terminal (as piped: no
    ``COLUMNS``), asserted on by several tests here (each used to run its own small bench,
    and tests/test_impl_bench.py one more: 125 s between two of them)."""
    import rmqsim.conformance.bench.power as bench_power

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bench_power, "power_loss_sweep",
                      _sweep_of_one_case_per_cell(bench_power.power_loss_sweep))
        result = CliRunner().invoke(cli, EVERY_SECTION, env={"COLUMNS": None})
    assert result.exit_code == 0, result.output
    return result


def _printed_verdicts(text: str) -> dict[str, str]:
    """``target NAME ...: ..., met|MISSED`` lines: verdict per figure name."""
    return {m[1]: m[2] for m in re.finditer(r"^target (\S+) .*, (met|MISSED)$", text, re.M)}


def test_bench_json_writes_a_record_per_figure_agreeing_with_what_it_prints(
    small_bench: Result,
) -> None:
    rows = [json.loads(line) for line in small_bench.stdout.splitlines()]
    for row in rows:
        _check_record(row)
    by_name = {row["name"]: row for row in rows}
    assert len(by_name) == len(rows), "figure names are unique"
    # Issue 40's targets; produce's ratios have one; smoke's lockstep rate has one (per
    # wall and per CPU second).
    assert by_name["consume.rocksmq.ratio"]["target"] == 0.8
    assert by_name["consume.commitlog.cpu_ratio"]["target"] == 0.5
    assert by_name["produce.rocksmq.ratio"]["target"] == 0.8
    assert by_name["produce.commitlog.cpu_ratio"]["target"] == 0.5
    assert by_name["lockstep.smoke.ops_per_s"]["target"] == 10_000
    assert by_name["lockstep.smoke.ops_per_cpu_s"]["target"] == 10_000
    assert by_name["lockstep.smoke.cpu_slowdown_vs_sut"]["target"] == 1.5
    assert by_name["lockstep.swarm.ops_per_s"]["target"] is None
    assert by_name["power.in-process.cases_per_s"]["target"] is None
    # This machine's speed against the targets' machine's: the model alone on smoke.
    slower = by_name["machine.slower_than_reference"]
    assert slower["target"] is None and slower["unit"] == "x"
    assert slower["value"] == pytest.approx(REFERENCE_MODEL_OPS_PER_CPU_S / by_name[
        "lockstep.smoke.model_ops_per_cpu_s"]["value"], rel=1e-3)
    assert f"is {slower['value']:.2f}x slower per CPU second" in small_bench.stderr
    # The least slowdown a lockstep running the model too can have: (SUT + model) / SUT.
    for profile in ("smoke", "swarm", "stream"):
        floor = by_name[f"lockstep.{profile}.model_floor_vs_sut"]
        sut, model = (by_name[f"lockstep.{profile}.{side}_ops_per_cpu_s"]["value"]
                      for side in ("sut", "model"))
        assert floor["target"] is None
        assert floor["value"] == pytest.approx(1 + sut / model, rel=1e-3)
    assert rows[0]["params"]["messages"] == 100 and rows[0]["cpus"] >= 1
    assert rows[0]["params"]["power_steps"] == 1
    # What is printed: one verdict line per targeted record, with the record's verdict.
    targeted = {r["name"]: "met" if r["met"] else "MISSED" for r in rows if r["target"]}
    assert _printed_verdicts(small_bench.stderr) == targeted
    assert "NO" not in small_bench.stderr.split()  # the old verdict against consume's non-target


def test_bench_json_to_stdout_is_data_only(small_bench: Result) -> None:
    """With ``--json -`` every line of standard output is a record, whatever section
    printed (backends, lockstep, power loss); the tables, the verdicts and the time go to
    standard error, the time last."""
    rows = [json.loads(line) for line in small_bench.stdout.splitlines()]
    assert {r["name"] for r in rows} >= {"produce.rocksmq.ratio", "consume.rocksmq.ratio",
                                         "lockstep.smoke.ops_per_s",
                                         "power.in-process.cases_per_s"}
    assert "rmqsim bench" in small_bench.stderr  # the tables and the time went to stderr
    assert "power loss: the storage sweep of smoke seed 0, 1 steps" in small_bench.stderr
    assert "lockstep: same operations three ways" in small_bench.stderr
    assert _printed_verdicts(small_bench.stderr)
    assert TIMING.match(small_bench.stderr.splitlines()[-1]), small_bench.stderr[-2000:]


def test_bench_measures_power_loss_cases_through_fuse_beside_in_process(
    small_bench: Result,
) -> None:
    """The power-loss table: the same cases in process and through FUSE, FUSE measured
    slower, none failing (was tests/test_power_fuse.py's, with a bench of its own)."""
    fuse_or_skip()
    table = small_bench.stderr
    assert "power loss: the storage sweep of smoke seed 0, 1 steps, sync" in table
    rows = {row.split("│")[1].strip(): row.split("│")[2:-1] for row in
            table.splitlines() if "│ fs=" in row or "│ FUSE" in row}
    assert set(rows) == {"fs= (in process)", "FUSE (a child process)"}
    in_process, fuse_row = rows["fs= (in process)"], rows["FUSE (a child process)"]
    assert in_process[0] == fuse_row[0] and int(fuse_row[0]) > 0  # the same cases
    assert int(fuse_row[0]) == BENCH_POWER_CASES
    assert in_process[4].strip() == "1.000x / 1.000x"
    assert re.fullmatch(r" *0\.\d{3}x / 0\.\d{3}x *", fuse_row[4])  # slower, measured
    assert fuse_row[5].strip() == in_process[5].strip() == "0"
    assert "power.fuse.cases_per_cpu_s" in {json.loads(line)["name"]
                                            for line in small_bench.stdout.splitlines()}


def test_bench_json_to_a_file_writes_the_records_beside_the_tables(tmp_path: Path) -> None:
    """``--json PATH`` replaces PATH with the records (checked as above) and leaves the
    tables and verdicts on standard output. The sections are the cheapest: what each
    section records is checked on ``small_bench``; written to a file or to standard
    output, the records are the same ``write_records``'s."""
    out = tmp_path / "bench.jsonl"
    out.write_text("an older run\n")
    args = [*SMALL, "--backend", "rocksmq", "--lockstep-seeds", "0", "--power-steps", "0"]
    result = CliRunner().invoke(cli, [*args, "--json", str(out)], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    for row in rows:
        _check_record(row)
    assert {r["name"] for r in rows} >= {"produce.rocksmq.ratio", "consume.rocksmq.ratio"}
    assert rows[0]["params"]["lockstep_seeds"] == 0
    targeted = {r["name"]: "met" if r["met"] else "MISSED" for r in rows if r["target"]}
    assert targeted and _printed_verdicts(result.stdout) == targeted
    assert "rmqsim bench: 100 messages" in result.stdout


def test_an_unwritable_json_path_is_refused_before_measuring(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, [*SMALL, "--json", str(tmp_path / "no" / "b.jsonl")])
    assert result.exit_code == 2
    assert result.output.startswith("rmqsim: error: --json ")


def _history_problems(text: str) -> list[str]:
    """What is wrong with each line of a history that is not a record as ``--json``
    writes it, named by its line number."""
    problems = []
    for number, line in enumerate(text.splitlines(), 1):
        try:
            _check_record(json.loads(line))
        except (AssertionError, ValueError, KeyError, TypeError) as exc:
            problems.append(f"line {number}: {exc!r}"[:300])
    return problems


def test_the_history_is_records_of_the_same_form() -> None:
    """One test for the whole file (it grows by a hundred lines a bench run), naming every
    line that is not a record."""
    problems = _history_problems(HISTORY.read_text())
    assert not problems, "\n".join(problems[:20])
    # The check is live: a record with a field missing, and a line that is not JSON.
    good = HISTORY.read_text().splitlines()[0]
    damaged = json.dumps({k: v for k, v in json.loads(good).items() if k != "unit"})
    found = _history_problems("\n".join([good, damaged, "{not json"]))
    assert [problem.split(":")[0] for problem in found] == ["line 2", "line 3"], found


def test_the_history_holds_every_figure_the_docs_plot() -> None:
    rows = [json.loads(line) for line in HISTORY.read_text().splitlines()]
    assert len({r["date"][:10] for r in rows}) >= 3, "a history spans several days"
    assert {"lockstep.smoke.ops_per_s", "produce.rocksmq.ratio"} <= {r["name"] for r in rows}


# ----------------------------------------------------------- what a small bench prints
# (were tests/test_impl_bench.py's, on a bench of their own: 200 messages, no power loss;
# here the tables are standard error's, the records going to standard output)


def test_bench_command_prints_ratios(small_bench: Result) -> None:
    result = small_bench
    assert "produce" in result.stderr and "consume" in result.stderr
    assert "lockstep" in result.stderr and "smoke" in result.stderr and "swarm" in result.stderr
    # Per backend (rocksmq, commitlog, commitlog-async) and operation (produce, consume) a
    # wall and a CPU ratio to its raw baseline; commitlog-async over rocksmq, per wall and
    # per CPU second; then three (vs SUT, per CPU, vs model) for each of smoke, swarm and
    # the stream layer's profile; and how much slower this machine is than the targets'.
    lines = result.stderr.splitlines()
    tables = "\n".join(line for line in lines if not line.startswith("target "))
    assert len(re.findall(r"\d+\.\d\dx", tables)) == 12 + 2 + 9 + 1 + 3, result.stderr
    assert re.search(r"the model's floor: .* smoke \d+\.\d\dx, swarm \d+\.\d\dx, stream "
                     r"\d+\.\d\dx$", result.stderr, re.M)
    assert re.search(r"this machine: the model alone on smoke is \d+\.\d\dx slower per CPU "
                     r"second than on the machine the targets were set on", result.stderr)
    # Below the tables, a verdict per target: the three produce rows' and (issue 40) the
    # three consume rows' wall and CPU ratios, commitlog-async over rocksmq, smoke's
    # lockstep rate per wall and per CPU second and the three slowdowns vs SUT (wall and
    # CPU).
    verdicts = [line for line in lines if line.startswith("target ")]
    assert len(verdicts) == 6 + 6 + 2 + 2 + 6, verdicts
    assert all(line.endswith((", met", ", MISSED")) for line in verdicts), verdicts
    assert "target consume.rocksmq.cpu_ratio >= 0.8x" in result.stderr
    assert "target consume.commitlog.ratio >= 0.5x" in result.stderr
    assert "target lockstep.smoke.cpu_slowdown_vs_sut <= 1.5x" in result.stderr
    assert "target lockstep.swarm.cpu_slowdown_vs_sut <= 3x" in result.stderr


def test_bench_reports_the_stream_lockstep_beside_the_stream_implementation_alone(
    small_bench: Result,
) -> None:
    result = small_bench
    [row] = [line for line in result.stderr.splitlines() if "stream (stream layer)" in line]
    # operations, then ops/s and ops/CPU-s for lockstep, implementation alone and model
    # alone, then the slowdowns vs the implementation (wall, CPU) and vs the model.
    cells = [cell.strip() for cell in row.strip("│┃ ").split("│")][1:]
    assert len(cells) == 10, row
    assert int(cells[0]) > 0 and all(float(c.replace(",", "")) > 0 for c in cells[1:7])
    assert all(re.fullmatch(r"\d+\.\d\dx", cell) for cell in cells[7:]), row
    assert "stream: vs the stream implementation alone" in result.stderr


def test_bench_command_prints_the_commit_log_rows_and_the_cpu_columns(
    small_bench: Result,
) -> None:
    """The backends asked for, and only them, per wall and CPU second (a bench of its own,
    without lockstep); the lockstep table's CPU columns and smoke's CPU target on
    ``small_bench``."""
    args = ["bench", "--messages", "100", "--repeats", "1", "--lockstep-seeds", "0",
            "--backend", "commitlog-async", "--backend", "rocksmq", "--protocol-seeds", "0",
            "--power-steps", "0"]
    result = CliRunner().invoke(cli, args, env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    rows = [line for line in result.output.splitlines() if "commitlog-async" in line]
    assert len([row for row in rows if "raw append" in row]) == 2, result.output  # both ops
    assert "msgs/CPU-s" in result.output and "CPU ratio" in result.output
    assert "commitlog-async produce / rocksmq produce:" in result.output
    assert "per CPU second" in result.output
    assert " commitlog " not in result.output  # only the backends asked for
    assert CliRunner().invoke(cli, [*args[:6], "--backend", "nope"]).exit_code == 2
    tables = "\n".join(line for line in small_bench.stderr.splitlines()
                        if not line.startswith("target "))
    assert tables.count("ops/CPU-s") == 3  # lockstep, SUT alone, model alone
    # Smoke's rate per CPU second has its target (issue 40), with its verdict.
    assert "target lockstep.smoke.ops_per_cpu_s >= 10,000 ops/CPU-s: " in small_bench.stderr


def test_a_piped_bench_prints_whole_numbers_not_a_table_squeezed_to_80_columns(
    small_bench: Result,
) -> None:
    result = small_bench  # standard error is not a tty, no COLUMNS
    assert "…" not in result.stderr, result.stderr
    row = next(line for line in result.stderr.splitlines() if "commitlog-async" in line)
    assert "raw append, fsync per 4 dirty pages or 10 s" in row, result.stderr
    assert len(re.findall(r"\b\d{1,3}(?:,\d{3})*\b(?![,\d])", row)) >= 4, row  # whole rates
    assert len(re.findall(r"\d+\.\d\dx", row)) == 2, row  # both ratios, in full
