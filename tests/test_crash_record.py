"""Crash information is typed: ``CrashRecord`` (a step's crash) and ``ArmedCrash`` (a crash
armed in the first open) round-trip through their JSON form, and a malformed one read
from a trace is refused with a clear error naming the line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rmqsim.conformance.crashing.crash_record import ArmedCrash, CrashRecord, CrashRecordError
from rmqsim.conformance.running.run import run_seed
from rmqsim.conformance.running.trace import TraceFormatError, parse_lines


def test_a_crash_record_round_trips_through_json() -> None:
    record = CrashRecord("produce.before_write", 2, "before")
    assert CrashRecord.from_json(record.to_json()) == record
    assert record.undid_operation and not CrashRecord("p", 1, "after").undid_operation
    armed = ArmedCrash(None, 3)
    assert ArmedCrash.from_json(armed.to_json()) == armed and armed.as_tuple() == (None, 3)


@pytest.mark.parametrize(
    ("obj", "needle"),
    [
        ([1], "'crash' must be an object"),
        ({"point": "p", "hit": 1}, "exactly point, hit and resolved"),
        ({"point": 1, "hit": 1, "resolved": "after"}, "point must be a string"),
        ({"point": "p", "hit": True, "resolved": "after"}, "hit an integer"),
        ({"point": "p", "hit": 1, "resolved": "sideways"}, "'before' or 'after'"),
    ],
)
def test_a_malformed_crash_record_is_refused(obj: Any, needle: str) -> None:
    with pytest.raises(CrashRecordError, match=needle):
        CrashRecord.from_json(obj)


def test_a_traces_steps_hold_typed_crash_records_and_its_bytes_are_unchanged() -> None:
    result = run_seed("crashy", 1, steps=120, crash_rate=0.05)
    steps = parse_lines(result.trace_lines).steps
    crashes = [s.crash for s in steps if s.crash is not None]
    assert crashes and all(isinstance(c, CrashRecord) for c in crashes)
    assert {c.resolved for c in crashes} == {"before", "after"}
    # the JSON form is what the trace line holds
    lines = [json.loads(line) for line in result.trace_lines[1:-1]]
    assert [line["crash"] for line in lines if "crash" in line] == [c.to_json() for c in crashes]


def test_a_bad_crash_record_in_a_trace_names_its_line(tmp_path: Path) -> None:
    result = run_seed("crashy", 1, steps=120, crash_rate=0.05)
    lines = list(result.trace_lines)
    number = next(i for i, line in enumerate(lines) if '"crash":' in line)
    obj = json.loads(lines[number])
    obj["crash"]["hit"] = "two"
    lines[number] = json.dumps(obj)
    with pytest.raises(TraceFormatError, match=f":{number + 1}: .*hit an integer"):
        parse_lines(lines, path=tmp_path / "t.jsonl")
