"""What ``rmqsim replay`` checks: everything the trace recorded (every outcome, the final
state, the step count), so that an edited trace is a mismatch (exit 1) or malformed
(exit 2, naming file and line), never a silent pass; and bad input of any kind is exit 2
with one line, never an internal error (exit 3)."""

from __future__ import annotations

import functools
import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from rmqsim.conformance.adapter import DEFAULT_IMPL, model_factory
from rmqsim.conformance.cli import cli
from rmqsim.conformance.queue.layer import trace_header
from rmqsim.conformance.reporting.report import render_failure
from rmqsim.conformance.running.run import replay_trace, run_seed
from rmqsim.conformance.running.trace import Trace, TraceStep, parse_lines, write_lines
from tests.test_replay_crash_flip import CONFIG, PROGRAM

#: ``rmqsim`` in a process of its own, on the code beside these tests.
ROOT = Path(__file__).resolve().parent.parent
RMQSIM = [sys.executable, "-c", "from rmqsim.conformance.cli import cli; cli(prog_name='rmqsim')"]


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


@functools.cache
def _lines(profile: str) -> tuple[str, ...]:
    """A real trace of ``profile`` on our queue (short: the checks are per line)."""
    result = run_seed(profile, 3, steps=120)
    assert result.ok, result.divergence
    return tuple(result.trace_lines)


def _write(tmp_path: Path, lines: list[str] | tuple[str, ...], name: str = "t.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(line + "\n" for line in lines))
    return path


def _edit(lines: tuple[str, ...], number: int, change: object) -> list[str]:
    """``lines`` with line ``number`` (1-based) parsed, changed by ``change(obj)`` and
    written back compactly."""
    edited = list(lines)
    obj = json.loads(edited[number - 1])
    change(obj)  # type: ignore[operator]
    edited[number - 1] = json.dumps(obj, sort_keys=True, separators=(",", ":"))
    return edited


def _malformed(result: Result, *needles: str) -> None:
    assert result.exit_code == 2, result.output
    assert "internal error" not in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output
    for needle in needles:
        assert needle in result.output, result.output


# ----------------------------------------------------------------- the final state


def test_shifting_every_time_changes_the_final_state_and_fails(tmp_path: Path) -> None:
    """Every outcome stays the same, but the messages' times, and so the final state, do
    not: the end line's state_digest catches it."""
    lines = _lines("crashy")
    assert invoke("replay", str(_write(tmp_path, lines, "clean.jsonl"))).exit_code == 0
    shifted = list(lines)
    for number in range(2, len(lines)):
        shifted = _edit(tuple(shifted), number, lambda o: o.update(t=o["t"] + 1_000_000))
    result = invoke("replay", str(_write(tmp_path, shifted)))
    assert result.exit_code == 1, result.output
    assert "DIVERGENCE trace-mismatch" in result.output
    assert "the final state differs from the one the trace recorded" in result.output
    assert f"trace-mismatch at operation {len(lines) - 2}" in result.output


@pytest.mark.parametrize("profile", ["crashy", "consumer"])
def test_a_changed_final_digest_fails(tmp_path: Path, profile: str) -> None:
    lines = _lines(profile)
    end = json.loads(lines[-1])
    wrong = end["state_digest"][:-1] + ("0" if end["state_digest"][-1] != "0" else "1")
    result = invoke(
        "replay",
        str(_write(tmp_path, [*lines[:-1], lines[-1].replace(end["state_digest"], wrong)])),
    )
    assert result.exit_code == 1, result.output
    assert f"state_digest {wrong} recorded, {end['state_digest']} replayed" in result.output


def test_a_flipped_crash_skips_the_final_state_and_says_so(tmp_path: Path) -> None:
    """A crash that resolved the other legal way leaves the other history's state: the
    recorded digest is not compared, and the note says so."""
    header = trace_header(
        profile="fuzz", profile_config={}, config=CONFIG, seed=0, impl="test", steps=None
    )
    steps = [TraceStep(i, 0, "test", op, None) for i, op in enumerate(PROGRAM, 1)]
    # Recorded on the model, which has no crash points: the armed crash never fires
    # (after); our queue crashes inside the produce (before).
    lines = replay_trace(Trace(header=header, steps=steps), impl=model_factory).trace_lines
    assert json.loads(lines[-1])["state_digest"] is not None
    result = invoke("replay", str(_write(tmp_path, lines)), "--impl", DEFAULT_IMPL)
    assert result.exit_code == 0, result.output
    assert "the recorded outcomes from there on and the final state_digest belong to the " \
        "other history" in result.output  # fmt: skip


# ----------------------------------------------------------------- malformed lines


@pytest.mark.parametrize("profile", ["crashy", "consumer"])
def test_a_step_without_its_outcome_is_malformed(tmp_path: Path, profile: str) -> None:
    lines = _lines(profile)
    removed = _edit(lines, 5, lambda o: o.pop("outcome"))
    _malformed(invoke("replay", str(path := _write(tmp_path, removed))), f"{path}:5:", "outcome")
    renamed = _edit(lines, 5, lambda o: o.update(outcomE=o.pop("outcome")))
    _malformed(invoke("replay", str(path := _write(tmp_path, renamed))), f"{path}:5:", "outcomE")


@pytest.mark.parametrize("profile", ["crashy", "consumer"])
def test_an_outcome_with_both_a_value_and_an_error_is_malformed(
    tmp_path: Path, profile: str
) -> None:
    """Found by the mutation harness: a consumer outcome was built from it, and the
    Outcome's invariant failed (exit 3)."""
    lines = _lines(profile)
    number = next(
        n for n, line in enumerate(lines, 1) if n > 1 and json.loads(line)["outcome"]["value"]
    )
    edited = _edit(lines, number, lambda o: o["outcome"].update(error="5"))
    path = _write(tmp_path, edited)
    _malformed(invoke("replay", str(path)), f"{path}:{number}:", "must be null")


def test_an_unrecorded_outcome_before_the_last_step_is_malformed(tmp_path: Path) -> None:
    lines = _edit(_lines("crashy"), 5, lambda o: o.update(outcome=None))
    _malformed(invoke("replay", str(path := _write(tmp_path, lines))), f"{path}:5:", "null")


@pytest.mark.parametrize(
    ("number", "change", "needle"),
    [
        (-1, lambda o: o.pop("state_digest"), "status ok must record its state_digest"),
        (-1, lambda o: o.update(state_digest="sha256:xyz"), "sha256:<64 hex>"),
        (-1, lambda o: o.update(statuS=o.pop("status")), "unknown field(s) 'statuS'"),
        (-1, lambda o: o.update(status="fine"), "end status must be"),
        (1, lambda o: o.update(open_crasH={"point": "x", "hit": 1}), "'open_crasH'"),
        (3, lambda o: o.update(sut_outcome={"value": 1, "error": None}), "sut_outcome"),
    ],
)
def test_edited_end_and_header_fields_are_malformed(
    tmp_path: Path, number: int, change: object, needle: str
) -> None:
    lines = _lines("crashy")
    number = number if number > 0 else len(lines)
    path = _write(tmp_path, _edit(lines, number, change))
    _malformed(invoke("replay", str(path)), f"{path}:{number}:", needle)


def test_an_unusable_impl_in_a_consumer_trace_header_is_named_as_the_headers(
    tmp_path: Path,
) -> None:
    """As for a queue trace: the file's header is named, and --impl is the way out."""
    lines = _edit(_lines("consumer"), 1, lambda o: o.update(impl="rmqsim.nomod:nofactory"))
    path = _write(tmp_path, lines)
    _malformed(invoke("replay", str(path)), f"{path}: the implementation its header names")
    ours = "rmqsim.conformance.consumer.run:impl_consumer_factory"
    assert invoke("replay", str(path), "--impl", ours).exit_code == 0


def test_a_crash_record_that_contradicts_its_outcome_is_malformed(tmp_path: Path) -> None:
    """A crash resolved ``before`` its operation has the outcome Crashed: flipping the
    record alone must not pass for a crash that resolved the other way (which stops the
    comparison of recorded outcomes)."""
    lines = _lines("crashy")
    number = next(
        n for n, line in enumerate(lines, 1) if '"resolved":"before"' in line and "Crashed" in line
    )
    path = _write(tmp_path, _edit(lines, number, lambda o: o["crash"].update(resolved="after")))
    _malformed(invoke("replay", str(path)), f"{path}:{number}:", "crash resolved after")


# ----------------------------------------------------------------- report labels


def test_a_trace_mismatch_report_labels_the_recorded_and_the_models_outcome() -> None:
    lines = list(_lines("crashy"))
    number = next(n for n, line in enumerate(lines) if '"value":[1' in line)
    lines[number] = lines[number].replace('"value":[1', '"value":[999999,1', 1)
    result = replay_trace(parse_lines(lines))
    assert result.anomaly == "trace-mismatch"
    report = render_failure(result).splitlines()
    (recorded,) = [line for line in report if line.startswith("  recorded ")]
    (model,) = [line for line in report if line.startswith("  model ")]
    assert "999999" in recorded and "999999" not in model
    assert not any(line.startswith("  sut ") for line in report)


# ----------------------------------------------------------------- exit 2, never 3


@pytest.mark.parametrize(
    ("number", "text", "needle"),
    [
        (1, '{"type":"header","seed":' + "[" * 100_000 + "]" * 100_000 + "}", "nested"),
        (3, '{"type":"step","i":2,"t":' + "[" * 100_000 + "]" * 100_000 + "}", "nested"),
        (3, '{"type":"step","i":2,"t":1' + "0" * 5000 + "}", "5001 digits"),
        (1, '{"type":"header","seed":-' + "9" * 4400 + "}", "4400 digits"),
        (3, '{"type":"step","i":2,"t":NaN}', "NaN is not JSON"),
        (3, '{"type":"step","i":2,"t":-Infinity}', "-Infinity is not JSON"),
        (3, '{"type":"step","i":2,"t":1e999}', "out of range"),
    ],
)
def test_values_json_allows_but_no_trace_holds_exit_2(
    tmp_path: Path, number: int, text: str, needle: str
) -> None:
    lines = list(_lines("crashy"))
    lines[number - 1] = text
    path = _write(tmp_path, lines)
    _malformed(invoke("replay", str(path)), f"{path}:{number}:", needle)


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "NaN", "infinity"])
@pytest.mark.parametrize(
    "command",
    [
        ("run", "--profile", "smoke", "--seed", "0", "--steps", "5", "--crash-rate"),
        ("run", "--profile", "smoke", "--seed", "0", "--steps", "5", "--shrink-budget-s"),
        ("gate", "--profiles", "smoke", "--seeds", "0:1", "--crash-rate"),
        ("gate", "--profiles", "smoke", "--seeds", "0:1", "--shrink-budget-s"),
        ("sweep", "--seeds", "0:1", "--determinism-sample"),
    ],
)
def test_float_options_refuse_nan_and_infinities(
    tmp_path: Path, command: tuple[str, ...], value: str
) -> None:
    result = invoke(*command, value, "--out", str(tmp_path / "out"))
    assert result.exit_code == 2, result.output
    assert "internal error" not in result.output and "Traceback" not in result.output
    assert f"Invalid value for '{command[-1]}'" in result.output, result.output
    assert not (tmp_path / "out").exists()  # refused before anything ran


def test_every_float_option_of_every_command_refuses_nan_and_infinities() -> None:
    """Not only the options above: any float option of any command (a plug-in's too)."""
    import click

    from rmqsim.conformance.cli.common import FiniteFloatRange

    context = click.Context(cli)
    floats = {
        f"{name} --{param.name}": param.type
        for name in cli.list_commands(context)
        for param in cli.get_command(context, name).params  # type: ignore[union-attr]
        if isinstance(param.type, click.types.FloatParamType)
    }
    assert len(floats) >= 4, floats
    loose = [where for where, kind in floats.items() if not isinstance(kind, FiniteFloatRange)]
    assert not loose, loose


def test_replay_reads_a_pipe(tmp_path: Path) -> None:
    """A pipe can be read once: the trace is not opened twice (to look at its header)."""
    lines = _lines("consumer")
    path = _write(tmp_path, lines)
    done = subprocess.run(
        [*RMQSIM, "replay", "/dev/stdin"],
        input=path.read_text(),  # through a pipe (a redirected file could be read twice)
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert f"{len(lines) - 2} operations conform" in done.stdout
    subprocess.run(["gzip", str(path)], check=True)
    queue = _write(tmp_path, _lines("crashy"), "q.jsonl")
    subprocess.run(["gzip", str(queue)], check=True)
    for gz, steps in ((f"{path}.gz", len(lines) - 2), (f"{queue}.gz", len(_lines("crashy")) - 2)):
        command = f"{shlex.join(RMQSIM)} replay <(zcat {shlex.quote(gz)})"
        done = subprocess.run(
            ["bash", "-c", command], capture_output=True, text=True, cwd=ROOT, timeout=120
        )
        assert done.returncode == 0, done.stderr
        assert f"{steps} operations conform" in done.stdout


def test_recorded_traces_round_trip(tmp_path: Path) -> None:
    """What the runs write is what the reader takes: a written trace replays clean."""
    for profile in ("crashy", "consumer"):
        path = tmp_path / f"{profile}.jsonl"
        write_lines(path, list(_lines(profile)))
        assert invoke("replay", str(path)).exit_code == 0
