"""One way in for every layer (issue 34): queue, storage, push consumer and stream
factories are loaded, sorted and refused the same way by every command, from the user's
own folder, by a dotted attribute too; the reproduction lines a run prints work from there."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from rmqsim.conformance.adapter import (
    LAYER_FORMS,
    LAYER_KEYWORDS,
    BadImplError,
    NoFormError,
    classify_factory,
    load_impl,
    resolve_impl,
)
from rmqsim.conformance.cli import cli
from rmqsim.conformance.running.gate import (
    GATE_CONSUMER_PROFILES,
    GATE_STREAM_PROFILES,
    all_gate_profiles,
    gate_profiles_for,
)

STREAM_GATE_PROFILES = GATE_STREAM_PROFILES
CONSUMER_IMPL = "rmqsim.conformance.consumer.run:impl_consumer_factory"

#: A user's module, written to their folder (the current directory of each test).
USER_MODULE = '''
from rmqsim.conformance.adapter import rocksmq_factory
from rmqsim.conformance.mutants.stream import dedup_by_msg_id
from rmqsim.impl.stream import stream_factory


def open_streams(*, queue):
    return stream_factory(queue=queue)


def open_buggy_streams(*, queue):
    return dedup_by_msg_id(queue=queue)


class Streams:
    @staticmethod
    def open(*, queue):
        return stream_factory(queue=queue)


def open_either(*, queue=None, path=None, config=None, clock=None, faults=None):
    return dedup_by_msg_id(queue=queue)


def open_declared(*, queue=None, path=None, config=None, clock=None, faults=None):
    return dedup_by_msg_id(queue=queue)


open_declared.rmqsim_layer = "stream"


def open_hidden(**kwargs):
    return rocksmq_factory(**kwargs)


def open_hidden_declared(**kwargs):
    return rocksmq_factory(**kwargs)


open_hidden_declared.rmqsim_layer = "queue"


def open_half(*, path, config):
    return rocksmq_factory(path=path, config=config, clock=lambda: 0, faults=None)
'''
MODULE = "rmqsim_user_layers"


@pytest.fixture
def user_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's folder, the current directory, holding ``MODULE``; ``sys.path`` as the
    ``rmqsim`` console script has it (no current directory)."""
    (tmp_path / f"{MODULE}.py").write_text(USER_MODULE)
    monkeypatch.chdir(tmp_path)
    _as_console_script(monkeypatch)
    return tmp_path


def _as_console_script(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forget ``MODULE`` and the current directory, as a new ``rmqsim`` process would."""
    monkeypatch.delitem(sys.modules, MODULE, raising=False)
    cwd = str(Path.cwd())
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", cwd)])


def invoke(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def _refused(result: Any, *needles: str) -> None:
    """Exit 2, one line, no traceback, holding every needle."""
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and "internal error" not in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output
    for needle in needles:
        assert needle in result.output, result.output


def test_a_stream_factory_from_the_users_folder_runs_and_its_repro_lines_work(
    user_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    impl = f"{MODULE}:open_buggy_streams"
    done = invoke("run", "--profile", "stream", "--seed", "0", "--steps", "60", "--impl", impl,
                  "--out", "out", "--no-shrink")  # fmt: skip
    assert done.exit_code == 1, done.output
    assert "DIVERGENCE stream-mismatch" in done.output
    lines = [line.strip() for line in done.output.splitlines()]
    repro = next(line.removeprefix("repro").strip() for line in lines if line.startswith("repro"))
    replay = next(line for line in lines if line.startswith("rmqsim replay"))
    assert f"--impl {impl}" in repro
    for printed in (repro, replay):  # each as a new process in the same folder runs it
        _as_console_script(monkeypatch)
        words = shlex.split(printed)
        assert words[0] == "rmqsim"
        again = invoke(*words[1:])
        assert again.exit_code == 1, (printed, again.output)
        assert "stream-mismatch" in again.output


def test_a_dotted_stream_factory_runs(user_folder: Path) -> None:
    done = invoke("run", "--profile", "stream", "--seed", "0", "--steps", "40",
                  "--impl", f"{MODULE}:Streams.open", "--out", "out")  # fmt: skip
    assert done.exit_code == 0, done.output


def test_a_factory_taking_stream_and_queue_keywords_must_declare_which_it_is(
    user_folder: Path,
) -> None:
    refused = invoke("run", "--profile", "stream", "--seed", "0", "--steps", "60",
                     "--impl", f"{MODULE}:open_either", "--out", "out")  # fmt: skip
    _refused(refused, "accepts the keywords of both a queue factory and a stream factory",
             "rmqsim_layer = 'queue' or 'stream'")  # fmt: skip
    # Declared a stream factory, it is the user's (buggy) streams that run, not ours.
    declared = invoke("run", "--profile", "stream", "--seed", "0", "--steps", "60",
                      "--impl", f"{MODULE}:open_declared", "--out", "out", "--no-shrink")
    assert declared.exit_code == 1, declared.output
    assert "DIVERGENCE stream-mismatch" in declared.output


def test_a_factory_hiding_its_keywords_is_refused_until_it_declares_its_form(
    user_folder: Path,
) -> None:
    hidden = invoke("run", "--profile", "smoke", "--seed", "0", "--steps", "20",
                    "--impl", f"{MODULE}:open_hidden", "--out", "out")  # fmt: skip
    _refused(hidden, "hides what it takes", "rmqsim_layer")
    declared = invoke("run", "--profile", "smoke", "--seed", "0", "--steps", "20",
                      "--impl", f"{MODULE}:open_hidden_declared", "--out", "out")
    assert declared.exit_code == 0, declared.output


def _every_form() -> list[str]:
    return [
        f"{LAYER_FORMS[layer]} factory({', '.join(k + '=' for k in LAYER_KEYWORDS[layer])})"
        for layer in LAYER_FORMS
    ]


@pytest.mark.parametrize(
    "command",
    [
        ("run", "--profile", "smoke", "--seed", "0", "--out", "out"),
        ("run", "--profile", "stream", "--seed", "0", "--out", "out"),
        ("run", "--profile", "consumer", "--seed", "0", "--out", "out"),
        ("gate", "--seeds", "0:1", "--out", "out"),
        ("crash-sweep", "--profile", "smoke", "--steps", "5", "--out", "out"),
        ("fuzz", "--examples", "1", "--out", "out"),
        ("replay", "TRACE"),
        ("shrink", "TRACE"),
        ("sweep", "--seeds", "0:1", "--out", "out"),
    ],
    ids=lambda command: "-".join(command[:2]),
)
def test_every_command_refuses_a_factory_of_no_form_naming_every_form_and_what_it_lacks(
    user_folder: Path, command: tuple[str, ...]
) -> None:
    if "TRACE" in command:
        trace = user_folder / "t.jsonl"
        ran = invoke("run", "--profile", "smoke", "--seed", "0", "--steps", "10",
                     "--trace", str(trace), "--out", "out")  # fmt: skip
        assert ran.exit_code == 0, ran.output
        command = tuple(str(trace) if word == "TRACE" else word for word in command)
    done = invoke(*command, "--impl", f"{MODULE}:open_half")
    _refused(done, f"--impl {MODULE}:open_half", "factory(*, path, config) is no form",
             "as a queue factory it lacks clock=, faults=", *_every_form())  # fmt: skip


def test_a_layer_defined_elsewhere_may_load_a_factory_of_its_own_form(user_folder: Path) -> None:
    """``resolve_impl`` (what a layer of a plugin or a test may use) loads the factory as
    ``load_impl`` does, without sorting it into a built-in form."""
    impl = f"{MODULE}:open_half"
    with pytest.raises(NoFormError) as refused:
        load_impl(impl)
    name, factory = resolve_impl(impl)
    assert name == impl and factory is refused.value.factory
    assert factory.__name__ == "open_half"
    with pytest.raises(BadImplError, match="has no attribute"):
        resolve_impl(f"{MODULE}:no_such")


def _fs_backend(*, path: Any, config: Any, clock: Any, faults: Any, fs: Any = None) -> Any:
    raise AssertionError("never opened here")


def _consumer(*, queue: Any, group: Any, topic: Any, config: Any, clock: Any, path: Any,
              send_hook: Any) -> Any:  # fmt: skip
    raise AssertionError("never opened here")


def _stream(*, queue: Any) -> Any:
    raise AssertionError("never opened here")


def _queue(*, path: Any, config: Any, clock: Any, faults: Any) -> Any:
    raise AssertionError("never opened here")


@pytest.mark.parametrize(
    ("factory", "layer"),
    [(_queue, "queue"), (_fs_backend, "storage"), (_consumer, "consumer"), (_stream, "stream")],
)
def test_each_form_is_its_layer(factory: Any, layer: str) -> None:
    assert classify_factory("f", factory).layer == layer


def test_builtin_names_load_with_their_layer_and_promise() -> None:
    assert [(load_impl(name).layer, load_impl(name).flush) for name in
            ("rocksmq", "commitlog", "commitlog-async", "stream", "stream-threaded")] == [
        ("queue", None), ("storage", "sync"), ("storage", "async"), ("stream", None),
        ("stream", None),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("attributes", "needle"),
    [
        ({"rmqsim_layer": "streams"}, "rmqsim_layer = 'streams' is not one of"),
        (
            {"rmqsim_layer": "consumer"},
            "rmqsim_layer = 'consumer' but lacks queue=, group=, topic=, send_hook= and "
            "also requires faults",
        ),
        ({"rmqsim_flush": "fsync"}, "rmqsim_flush = 'fsync' is not one of 'sync', 'async'"),
    ],
)
def test_a_wrong_declaration_is_refused(attributes: dict[str, str], needle: str) -> None:
    def factory(*, path: Any, config: Any, clock: Any, faults: Any, fs: Any = None) -> Any:
        raise AssertionError("never opened here")

    vars(factory).update(attributes)
    with pytest.raises(BadImplError, match="--impl f: ") as refused:
        classify_factory("f", factory)
    assert needle in str(refused.value)


def test_a_flush_promise_on_a_factory_that_is_no_storage_backend_is_refused() -> None:
    def factory(*, path: Any, config: Any, clock: Any, faults: Any) -> Any:
        raise AssertionError("never opened here")

    factory.rmqsim_flush = "async"  # type: ignore[attr-defined]
    with pytest.raises(BadImplError, match="a storage backend's promise, but it is a queue"):
        classify_factory("f", factory)


# ---------------------------------------------------------------- by the impl's layer

#: The repository's regression corpus: queue and stream traces.
REPO_CORPUS = Path(__file__).resolve().parent.parent / "regressions"


def _summary(out: Path) -> dict[str, Any]:
    summary: dict[str, Any] = json.loads((out / "summary.json").read_text())
    return summary


def test_gate_runs_the_stream_profiles_of_a_stream_factory_and_its_corpus_files(
    user_folder: Path,
) -> None:
    done = invoke("gate", "--impl", f"{MODULE}:open_streams", "--seeds", "0:1", "--jobs", "1",
                  "--corpus", str(REPO_CORPUS), "--out", "out")  # fmt: skip
    assert done.exit_code == 0, done.output
    summary = _summary(user_folder / "out")
    # (stream-steer: the runs the gate aims at stream cells its profiles left empty)
    assert set(summary["profiles"]) - {"stream-steer"} == {*STREAM_GATE_PROFILES, "regressions"}
    stream_files = [p for p in REPO_CORPUS.glob("*.jsonl") if '"layer":"stream"' in
                    p.read_text().partition("\n")[0].replace(" ", "")]  # fmt: skip
    assert stream_files and summary["regressions"]["files"] == len(stream_files)
    # The user's streams are what runs: a wrong one fails every stream profile.
    wrong = invoke("gate", "--impl", f"{MODULE}:open_buggy_streams", "--seeds", "0:1",
                   "--jobs", "1", "--no-shrink", "--out", "wrong")  # fmt: skip
    assert wrong.exit_code == 1, wrong.output
    assert {name: s["failed"] for name, s in _summary(user_folder / "wrong")["profiles"].items()} \
        == dict.fromkeys(STREAM_GATE_PROFILES, 1)  # fmt: skip


def test_gate_runs_the_consumer_profiles_of_a_consumer_factory(user_folder: Path) -> None:
    done = invoke("gate", "--impl", CONSUMER_IMPL, "--seeds", "0:1", "--jobs", "1",
                  "--corpus", str(REPO_CORPUS), "--out", "out")  # fmt: skip
    assert done.exit_code == 0, done.output
    assert sorted(_summary(user_folder / "out")["profiles"]) == sorted(GATE_CONSUMER_PROFILES)


def test_gate_profiles_by_layer() -> None:
    assert gate_profiles_for("queue") == gate_profiles_for("storage") == all_gate_profiles()
    assert gate_profiles_for("consumer") == GATE_CONSUMER_PROFILES
    assert gate_profiles_for("stream") == STREAM_GATE_PROFILES


def test_fuzz_drives_the_layer_of_its_impl_by_default(user_folder: Path) -> None:
    done = invoke("fuzz", "--impl", f"{MODULE}:open_streams", "--examples", "1",
                  "--out", "out")  # fmt: skip
    assert done.exit_code == 0, done.output
    assert f"rmqsim fuzz: {MODULE}:open_streams, stream layer" in done.output


def test_an_impl_that_names_nothing_says_what_an_impl_looks_like() -> None:
    with pytest.raises(BadImplError, match="--impl must be module:factory, exec:COMMAND or one "
                       "of rocksmq, commitlog, commitlog-async, stream, stream-threaded, "
                       "commitlog-store, milvus, rocketmq-store, "
                       "got 'strem'"):
        load_impl("strem")
