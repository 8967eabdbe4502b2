"""Bad input found by a first-time user's audit: each gets one clear line and exit 2 (or a
note), never an internal error (exit 3) and never a silent pass."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from rmqsim.conformance.adapter import BadImplError, load_factory
from rmqsim.conformance.cli import cli
from rmqsim.conformance.running import scratch

CONSUMER_IMPL = "rmqsim.conformance.consumer.run:impl_consumer_factory"
ADAPTER = '''
from rmqsim.conformance.adapter import rocksmq_factory


def open_queue(*, path, config, clock, faults):
    return rocksmq_factory(path=path, config=config, clock=clock, faults=faults)
'''


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def _bad_input(result, *needles: str) -> None:
    assert result.exit_code == 2, result.output
    assert "internal error" not in result.output and "Traceback" not in result.output
    for needle in needles:
        assert needle in result.output, result.output


@pytest.fixture
def console_script_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """``sys.path`` as the ``rmqsim`` console script has it: no current directory."""
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", str(Path.cwd()))])


# ---------------------------------------------------------------------- --impl


@pytest.mark.usefixtures("console_script_path")
def test_an_adapter_in_the_current_directory_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's bring-your-own-queue step: ``my_adapter.py`` next to the user."""
    (tmp_path / "rmqsim_test_adapter.py").write_text(ADAPTER)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "rmqsim_test_adapter", raising=False)
    result = invoke(
        "run", "--profile", "smoke", "--seed", "0", "--steps", "30",
        "--impl", "rmqsim_test_adapter:open_queue", "--out", str(tmp_path / "out"),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert sys.path[-1] == str(tmp_path)  # last: it can never hide an installed package


@pytest.mark.usefixtures("console_script_path")
def test_a_missing_module_is_still_reported_plainly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(BadImplError, match="No module named 'no_such_adapter'"):
        load_factory("no_such_adapter:open_queue")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("fuzz", "--layer", "queue", "--examples", "2"), "fuzzing needs a queue factory"),
        (("crash-sweep", "--profile", "smoke", "--steps", "10"), "a crash sweep needs a queue"),
    ],
)
def test_a_consumer_factory_where_only_a_queue_runs_exits_2(
    tmp_path: Path, args: tuple[str, ...], needle: str
) -> None:
    result = invoke(*args, "--impl", CONSUMER_IMPL, "--out", str(tmp_path))
    _bad_input(result, f"--impl {CONSUMER_IMPL} is a push consumer factory", needle)


def _queue_trace(tmp_path: Path, **header: object) -> Path:
    trace = tmp_path / "t.jsonl"
    invoke(
        "run", "--profile", "smoke", "--seed", "1", "--steps", "20",
        "--trace", str(trace), "--out", str(tmp_path),
    )  # fmt: skip
    lines = trace.read_text().splitlines()
    lines[0] = json.dumps({**json.loads(lines[0]), **header})
    trace.write_text("\n".join(lines) + "\n")
    return trace


def test_replaying_a_queue_trace_with_a_consumer_factory_exits_2(tmp_path: Path) -> None:
    result = invoke("replay", str(_queue_trace(tmp_path)), "--impl", CONSUMER_IMPL)
    _bad_input(result, "replaying a queue trace needs a queue factory")


def test_an_unusable_impl_in_a_trace_header_is_named_as_the_headers(tmp_path: Path) -> None:
    trace = _queue_trace(tmp_path, impl="nomod:nofactory")
    _bad_input(invoke("replay", str(trace)), f"{trace}: the implementation its header names")
    ours = "rmqsim.conformance.adapter:rocksmq_factory"
    assert invoke("replay", str(trace), "--impl", ours).exit_code == 0


def test_a_queue_profile_run_with_a_consumer_factory_says_what_it_checks(tmp_path: Path) -> None:
    result = invoke(
        "run", "--profile", "smoke", "--seed", "0", "--steps", "20", "--impl", CONSUMER_IMPL,
        "--out", str(tmp_path),
    )  # fmt: skip
    assert result.exit_code == 0
    assert "queue profile smoke checks rmqsim's own queue" in result.stderr


def test_crash_sweep_of_a_consumer_profile_exits_2(tmp_path: Path) -> None:
    result = invoke("crash-sweep", "--profile", "consumer", "--out", str(tmp_path))
    _bad_input(result, "crash-sweep runs queue profiles; 'consumer' is a consumer profile")


# ---------------------------------------------------------------------- paths and seeds


def test_an_unusable_workdir_exits_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv(scratch.WORKDIR_ENV, str(blocker / "sub"))
    result = invoke("run", "--profile", "smoke", "--seed", "0", "--out", str(tmp_path))
    _bad_input(result, f"{scratch.WORKDIR_ENV}={blocker / 'sub'}: not a writable directory")


def test_a_missing_workdir_is_created(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    workdir = tmp_path / "work"  # its parent exists (else exit 2: tests/test_scratch.py)
    monkeypatch.setenv(scratch.WORKDIR_ENV, str(workdir))
    out = str(tmp_path / "out")
    result = invoke("run", "--profile", "smoke", "--seed", "0", "--steps", "20", "--out", out)
    assert result.exit_code == 0, result.output
    assert workdir.is_dir() and list(workdir.iterdir()) == []


def test_an_unwritable_trace_file_exits_2_before_running(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    trace = blocker / "t.jsonl"
    result = invoke("run", "--profile", "smoke", "--seed", "0", "--trace", str(trace))
    _bad_input(result, f"--trace {trace}: directory {blocker}: not a writable directory")


def test_an_unwritable_regression_dir_exits_2_before_running(tmp_path: Path) -> None:
    """Checked up front: after a divergence, the error would hide its exit code 1."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    result = invoke(
        "run", "--profile", "smoke", "--seed", "0", "--out", str(tmp_path / "out"),
        "--impl", "rmqsim.conformance.mutants.milvus:decimal_keys", "--no-shrink",
        "--save-regression", str(blocker / "corpus"),
    )  # fmt: skip
    _bad_input(result, "--save-regression", "not a writable directory")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


@pytest.mark.parametrize("seeds", ["0:99999999999999999999", f"{2**63 - 1}:{2**63}"])
def test_seeds_beyond_64_bits_exit_2(seeds: str) -> None:
    _bad_input(invoke("run", "--profile", "smoke", "--seeds", seeds), "seeds must be below")


# ---------------------------------------------------------------------- consumer traces


def test_a_consumer_trace_with_a_bad_client_config_names_its_header(tmp_path: Path) -> None:
    from rmqsim.conformance.running.run import run_seed

    lines = run_seed("consumer", 0, steps=10).trace_lines
    header = json.loads(lines[0])
    header["profile_config"]["clients"][0]["consumer"]["max_reconsume_times"] = -3
    trace = tmp_path / "c.jsonl"
    trace.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    _bad_input(invoke("replay", str(trace)), f"{trace}:1: header profile_config:")


# ---------------------------------------------------------------------- small things


def test_a_failing_replay_says_so_on_stdout(tmp_path: Path) -> None:
    """stderr has the report; stdout, what a script reads, gets one line too."""
    out = tmp_path / "out"
    mutant = "rmqsim.conformance.mutants.crash:hwm_not_persisted"
    invoke(
        "run", "--profile", "smoke", "--seed", "4", "--steps", "500", "--impl", mutant,
        "--no-shrink", "--out", str(out),
    )  # fmt: skip
    (trace,) = out.glob("*.jsonl")
    result = invoke("replay", str(trace), "--impl", mutant)
    assert result.exit_code == 1
    assert f"rmqsim replay: {trace}: id-reuse at operation 203" in result.stdout


def test_a_new_failing_trace_removes_a_stale_shrunk_one_beside_it(tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ("run", "--profile", "smoke", "--seed", "4", "--steps", "500", "--out", str(out))
    mutant = ("--impl", "rmqsim.conformance.mutants.crash:hwm_not_persisted")
    assert invoke(*args, *mutant).exit_code == 1
    (shrunk,) = out.glob("*.shrunk.jsonl")
    assert invoke(*args, *mutant, "--no-shrink").exit_code == 1
    assert not shrunk.exists()  # it would pass for the reproducer of a run that made none


def test_mutants_take_their_factory_spelling_too(tmp_path: Path) -> None:
    result = invoke(
        "mutants", "--only", "hwm_not_persisted", "--seeds", "0:1", "--steps", "50",
        "--no-shrink", "--out", str(tmp_path),
    )  # fmt: skip
    assert result.exit_code in (0, 1), result.output  # ran: the name was accepted
    assert "hwm-not-persisted" in result.output


# ---------------------------------------------------------------------- --profiles


@pytest.mark.parametrize("command", ["gate", "sweep"])
@pytest.mark.parametrize(
    ("profiles", "message"),
    [
        ("", "names no profile"),
        (" , ", "names no profile"),
        ("smoke,churn,smoke", "smoke more than once"),
    ],
)
def test_profiles_that_name_none_or_one_twice_exit_2(
    tmp_path: Path, command: str, profiles: str, message: str
) -> None:
    """``--profiles ""`` once meant every profile, and a doubled name ran its seeds twice;
    both are refused before anything runs (the sweep before Spark starts)."""
    result = invoke(
        command, "--profiles", profiles, "--seeds", "0:1", "--out", str(tmp_path / "out")
    )
    _bad_input(result, "--profiles", message)
    assert not (tmp_path / "out").exists()


def test_a_trailing_comma_in_profiles_is_not_a_profile(tmp_path: Path) -> None:
    result = invoke(
        "gate", "--profiles", "smoke,", "--seeds", "0:1", "--steps", "20", "--no-crash-sweep",
        "--corpus", str(tmp_path), "--out", str(tmp_path / "out"),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert list(summary["profiles"]) == ["smoke"], summary
