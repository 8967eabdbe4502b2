"""``rmqsim bench --json``: one record per figure, every target with its verdict and no
verdict without a target; the printed verdicts and the records agree; and the history
(``bench/history.jsonl``) is records of the same form."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from rmqsim.conformance.bench.data import RECORD_FIELDS, Figure, verdict_lines
from rmqsim.conformance.cli import cli

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


def test_bench_json_writes_a_record_per_figure_agreeing_with_what_it_prints(
    tmp_path: Path,
) -> None:
    out = tmp_path / "bench.jsonl"
    result = CliRunner().invoke(cli, [*SMALL, "--json", str(out)], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    for row in rows:
        _check_record(row)
    by_name = {row["name"]: row for row in rows}
    assert len(by_name) == len(rows), "figure names are unique"
    # Consume has no target; produce's ratios do; smoke's lockstep rate has one.
    assert by_name["consume.rocksmq.ratio"]["target"] is None
    assert by_name["produce.commitlog.cpu_ratio"]["target"] == 0.5
    assert by_name["lockstep.smoke.ops_per_s"]["target"] == 10_000
    assert by_name["lockstep.swarm.ops_per_s"]["target"] is None
    assert rows[0]["params"]["messages"] == 100 and rows[0]["cpus"] >= 1
    # What is printed: one verdict line per targeted record, with the record's verdict.
    printed = {m[1]: m[2] for m in re.finditer(r"^target (\S+) .*, (met|MISSED)$",
                                               result.output, re.M)}  # fmt: skip
    targeted = {r["name"]: "met" if r["met"] else "MISSED" for r in rows if r["target"]}
    assert printed == targeted
    assert "NO" not in result.output.split()  # the old verdict against consume's non-target


def test_bench_json_to_stdout_is_data_only() -> None:
    result = CliRunner().invoke(cli, [*SMALL, "--backend", "rocksmq", "--lockstep-seeds",
                                      "0", "--json", "-"])  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert {r["name"] for r in rows} >= {"produce.rocksmq.ratio", "consume.rocksmq.ratio"}
    assert "rmqsim bench" in result.stderr  # the tables and the time went to stderr


def test_an_unwritable_json_path_is_refused_before_measuring(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, [*SMALL, "--json", str(tmp_path / "no" / "b.jsonl")])
    assert result.exit_code == 2
    assert result.output.startswith("rmqsim: error: --json ")


@pytest.mark.parametrize("line", HISTORY.read_text().splitlines(), ids=lambda _: "record")
def test_the_history_is_records_of_the_same_form(line: str) -> None:
    _check_record(json.loads(line))


def test_the_history_holds_every_figure_the_docs_plot() -> None:
    rows = [json.loads(line) for line in HISTORY.read_text().splitlines()]
    assert len({r["date"][:10] for r in rows}) >= 3, "a history spans several days"
    assert {"lockstep.smoke.ops_per_s", "produce.rocksmq.ratio"} <= {r["name"] for r in rows}
