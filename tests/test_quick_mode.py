"""``./scripts/test.sh --quick``: which tests a development run leaves out."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.slow_list import THRESHOLD_S, parse_durations, read_slow_list, slow_entries

ROOT = Path(__file__).resolve().parent.parent


def test_durations_add_up_the_phases_of_a_test() -> None:
    log = ("============ slowest durations ============\n"
           "3.50s call     tests/test_a.py::test_x\n"
           "0.40s setup    tests/test_a.py::test_x\n"
           "0.01s teardown tests/test_b.py::test_y[p1 q]\n")
    assert parse_durations(log) == {"tests/test_a.py::test_x": 3.9,
                                    "tests/test_b.py::test_y[p1 q]": 0.01}


def test_a_file_mostly_slow_is_left_out_whole_else_test_by_test() -> None:
    durations = {
        "tests/spark.py::test_first": 30.0,  # its fixture's start-up
        "tests/spark.py::test_second": 0.5,
        "tests/mixed.py::test_slow": THRESHOLD_S,
        "tests/mixed.py::test_fast_1": 0.6,
        "tests/mixed.py::test_fast_2": 0.6,
        "tests/fast.py::test_fast": 0.2,
    }
    assert slow_entries(durations) == [(30.5, "tests/spark.py"),
                                       (THRESHOLD_S, "tests/mixed.py::test_slow")]


def test_the_list_is_read_back_without_its_comments(tmp_path: Path) -> None:
    listed = tmp_path / "slow.txt"
    listed.write_text("# a comment\n30.50 tests/spark.py\n1.00 tests/m.py::test_y[a b]\n")
    assert read_slow_list(listed) == {"tests/spark.py", "tests/m.py::test_y[a b]"}
    assert read_slow_list(tmp_path / "missing.txt") == frozenset()


def _collected(slow_list: Path, *args: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "-p", "no:xdist", *args, "tests/test_power_fuse.py"],
        cwd=ROOT, capture_output=True, text=True, check=True,
        env={**os.environ, "RMQSIM_SLOW_TESTS": str(slow_list)}).stdout
    return {line for line in out.splitlines() if "::" in line}


def test_quick_leaves_out_the_listed_tests_and_those_marked_slow(tmp_path: Path) -> None:
    marked = ("tests/test_power_fuse.py::"
              "test_the_commit_log_cut_through_fuse_leaves_what_it_leaves_in_process[sync]")
    listed = "tests/test_power_fuse.py::test_through_needs_storage"
    slow_list = tmp_path / "slow.txt"
    slow_list.write_text(f"# measured\n2.00 {listed}\n")
    everything, quick = _collected(slow_list), _collected(slow_list, "--quick")
    assert {marked, listed} <= everything and not {marked, listed} & quick
    kept = ("tests/test_power_fuse.py::"
            "test_without_fuse_the_sweep_is_skipped_saying_why_unless_required")
    assert kept in quick and quick < everything
