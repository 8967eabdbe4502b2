"""The stream layer through the generic harness (``conformance.stream.layer``): ``rmqsim
run --profile stream...`` checks impl.stream in lockstep with the model, traces replay,
bad traces are exit 2 naming file and line, every stream mutant is caught by a stream
profile with an anomaly named after what breaks, and shrinks to at most 10 operations."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from rmqsim.conformance.cli import cli
from rmqsim.conformance.layer import layer_for_profile
from rmqsim.conformance.mutants.stream import MUTANTS
from rmqsim.conformance.running.run import RunResult, run_seed, spec_for_seed
from rmqsim.conformance.searching.shrink import shrink_result
from rmqsim.conformance.stream.layer import STREAM_GATE_PROFILES
from rmqsim.conformance.stream.run import StreamLockstep, resolve_stream_impl
from rmqsim.scenarios.queue.ops import Outcome, Step
from rmqsim.scenarios.stream.ops import (
    INSERT,
    TIME_TICK,
    Broadcast,
    OpenConsumer,
    OpenProducer,
    Produce,
    Seek,
    StreamMsg,
)
from rmqsim.scenarios.stream.profiles import STREAM_PROFILES, resolve_stream

#: The anomaly each of these mutants must be reported as (the others: any).
NAMED = {
    "pack-by-begin-ts": "message-outside-pack",
    "seek-drops-by-begin-ts": "lost-on-resume",
    "lost-wakeup": "stalled-delivery",
    "equal-ticks-only": "stalled-delivery",
}


def _invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.output


@pytest.mark.parametrize("profile", STREAM_GATE_PROFILES)
def test_stream_profiles_conform_and_repeat(profile: str) -> None:
    assert layer_for_profile(profile).name == "stream"
    runs = [run_seed(profile, seed) for seed in (0, 1)]
    assert all(run.ok for run in runs), [run.anomaly for run in runs]
    assert run_seed(profile, 1).trace_digest == runs[1].trace_digest
    assert runs[0].trace_digest != runs[1].trace_digest


def test_the_threaded_streams_conform_too() -> None:
    run = run_seed("stream-crashy", 4, impl="stream-threaded")
    assert run.ok and run.spec.impl == "stream-threaded"


def test_run_writes_a_trace_that_replays(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    code, output = _invoke("run", "--profile", "stream-seek", "--seed", "2", "--trace", str(trace))
    assert code == 0, output
    assert json.loads(trace.read_text().splitlines()[0])["layer"] == "stream"
    code, output = _invoke("replay", str(trace))
    assert code == 0 and "conform" in output


def _bad_trace(tmp_path: Path, line: int, edit) -> Path:
    good = tmp_path / "good.jsonl"
    _invoke("run", "--profile", "stream", "--seed", "0", "--steps", "30", "--trace", str(good))
    lines = good.read_text().splitlines()
    obj = json.loads(lines[line - 1])
    edit(obj)
    lines[line - 1] = json.dumps(obj)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    return bad


@pytest.mark.parametrize(
    ("line", "edit", "says"),
    [
        (3, lambda o: o["op"].update(kind="stream_explode"), "unknown stream operation"),
        (3, lambda o: o["op"].update(producer="nobody"), "not an actor"),
        (1, lambda o: o["profile_config"].update(channels=0), "profile_config"),
    ],
)
def test_a_malformed_stream_trace_is_exit_2_naming_file_and_line(
    tmp_path: Path, line: int, edit, says: str
) -> None:
    bad = _bad_trace(tmp_path, line, edit)
    code, output = _invoke("replay", str(bad))
    assert code == 2, output
    assert f"{bad}:{line}" in output and says in output
    assert "Traceback" not in output


def _produce(msg: StreamMsg) -> Produce:
    return Produce("producer-0", (msg,))


@pytest.mark.parametrize(
    ("op", "error"),
    [
        (_produce(StreamMsg(999, 1, 0, (1,), b"", ((1, 5),))), "InvalidPack"),
        (_produce(StreamMsg(INSERT, 1, 0, (2**32,), b"", ((1, 5),))), "InvalidPack"),
        (_produce(StreamMsg(INSERT, 1, -1, (1,), b"", ((1, 5),))), "InvalidPack"),
        (_produce(StreamMsg(INSERT, 1, 0, (1, 2), b"", ((1, 5),))), "InvalidPack"),
        (_produce(StreamMsg(INSERT, 1, 0, (), b"", ())), "InvalidPack"),
        (Broadcast("producer-0", (StreamMsg(TIME_TICK, 0, 2**64, (0,)),)), "InvalidPack"),
        (Seek("tt-0", (("elsewhere", 1, 0),), True), "InvalidPosition"),
        (Seek("tt-0", (("ch0", 99, 0),), True), "InvalidPosition"),
        (Seek("tt-0", (("ch0", 1, -5),), True), "InvalidPosition"),
    ],
)  # fmt: skip
def test_bad_input_is_the_same_typed_error_on_both_sides(op, error: str, tmp_path: Path) -> None:
    """A malformed pack or position gets a typed error from the model and the
    implementation alike, and the lockstep compares them (no divergence)."""
    profile = resolve_stream(STREAM_PROFILES["stream"], 0)
    spec = spec_for_seed("stream", 0)
    _, sut = resolve_stream_impl("stream")
    lockstep = StreamLockstep(spec, profile)
    lockstep.open(tmp_path, sut)
    try:
        lockstep.execute(Step(0, "setup", OpenProducer("producer-0")))
        lockstep.execute(Step(0, "setup", OpenConsumer("tt-0", True, "tt-0")))
        assert lockstep.execute(Step(1, "actor", op)) == Outcome(error=error)
        lockstep.finish()
    finally:
        lockstep.close()


@functools.cache
def _first_failure(impl: str) -> RunResult:
    """The first failing run over the gate's stream profiles, seeds 0..4, as the gate
    meets them. Run once per process: a mutant's caught test and its shrink test (which
    only reads it) share it when they run in the same worker."""
    for seed in range(5):
        for profile in STREAM_GATE_PROFILES:
            result = run_seed(profile, seed, impl=impl)
            if not result.ok:
                return result
    raise AssertionError(f"{impl} survived every stream profile on seeds 0..4")


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_each_stream_mutant_is_caught_by_a_stream_profile(mutant) -> None:
    result = _first_failure(mutant.impl)
    assert result.anomaly in layer_for_profile("stream").anomalies
    if mutant.name in NAMED:
        assert result.anomaly == NAMED[mutant.name]


@pytest.mark.slow
@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_each_stream_mutant_shrinks_to_at_most_ten_operations(mutant) -> None:
    result = _first_failure(mutant.impl)
    shrunk = shrink_result(result)
    assert shrunk is not None and shrunk.anomaly == result.anomaly
    assert shrunk.steps <= SHRUNK_BOUND.get(mutant.name, 10), shrunk.steps


#: Mutants whose shortest failure is longer: a seek to an id retention removed needs the
#: writes, the reads and the time that let retention remove it (measured: 31 operations).
SHRUNK_BOUND = {"missing-id-seeks-to-latest": 40}


STREAM_CORPUS = sorted(
    path
    for path in (Path(__file__).resolve().parents[2] / "regressions").glob("*.jsonl")
    if json.loads(path.read_text().splitlines()[0]).get("layer") == "stream"
)


def test_the_corpus_holds_stream_failures() -> None:
    assert len(STREAM_CORPUS) >= 3


@pytest.mark.parametrize("path", STREAM_CORPUS, ids=lambda p: p.name)
def test_a_stream_regression_replays_clean_and_fails_on_its_mutant(path: Path) -> None:
    header = json.loads(path.read_text().splitlines()[0])
    assert _invoke("replay", str(path))[0] == 0
    code, output = _invoke("replay", str(path), "--impl", header["found_on"])
    anomaly = path.stem.rsplit("-", 1)[0]
    assert code == 1 and f"{anomaly} at operation" in output


@pytest.mark.parametrize(
    ("impl", "says"),
    [
        ("rmqsim.conformance.mutants.consumer:commit_highest_acked", "push consumer factory"),
        ("rmqsim.impl.stream:no_such_factory", "no attribute"),
        ("nonsense", "module:factory"),
    ],
)
def test_a_bad_stream_impl_is_exit_2_in_one_line(impl: str, says: str) -> None:
    code, output = _invoke("run", "--profile", "stream", "--seed", "0", "--impl", impl)
    assert code == 2 and says in output and "Traceback" not in output
