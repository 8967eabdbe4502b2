"""``rmqsim fuzz --layer consumer|stream|store`` (issue 26; the store and every layer by
default: issue 38): hypothesis draws every choice of the
layer's simulation, the layer's lockstep checks each step, a failure is shrunk and written
as a trace of that layer that ``rmqsim replay`` reproduces."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from click.testing import CliRunner

from rmqsim.conformance.adapter import DEFAULT_IMPL
from rmqsim.conformance.cli import cli
from rmqsim.conformance.cli.fuzz import LAYER_NAMES
from rmqsim.conformance.mutants.catalogue import select
from rmqsim.conformance.mutants.kill import KILLED, fuzz_mutant
from rmqsim.conformance.running.run import (
    parse_run_lines,
    read_run_trace,
    replay_file,
    replay_run_trace,
)
from rmqsim.conformance.searching.fuzz_layers import SteeredRandom, fuzzable_layers
from rmqsim.conformance.searching.stateful import fuzz

#: A consumer mutant the default consumer fuzz finds in its first examples.
CONSUMER_MUTANT = "failed-send-back-advances"
#: A stream mutant the default stream fuzz finds in its first examples.
STREAM_MUTANT = "non-increasing-tick-accepted"
#: Storage-layer (message store) mutants the default gate's store profiles kill, and the
#: default store fuzz too.
STORE_MUTANTS = ["store-get-from-next", "store-retain-past-cutoff", "store-min-stays-zero"]


def test_the_cli_offers_every_layer_a_fuzzer_drives() -> None:
    assert LAYER_NAMES == fuzzable_layers() == ("queue", "consumer", "stream", "store")


def test_steered_draws_stop_at_the_drain_and_at_their_bound() -> None:
    draining = [False]
    rng = SteeredRandom(random.Random(1), random.Random(2), lambda: draining[0], max_draws=2)
    steered, fallback = random.Random(1), random.Random(2)
    assert rng.randint(0, 10**9) == steered.randint(0, 10**9)
    draining[0] = True
    assert rng.randint(0, 10**9) == fallback.randint(0, 10**9)
    draining[0] = False
    assert rng.random() == steered.random()
    assert rng.random() == fallback.random()  # past the bound
    assert rng.draws_left == 0


def test_long_random_bytes_are_filler_and_short_ones_steered() -> None:
    rng = SteeredRandom(random.Random(1), random.Random(2), lambda: False, max_draws=5)
    steered, fallback = random.Random(1), random.Random(2)
    assert rng.randbytes(2048) == fallback.randbytes(2048)  # a store's body: no draw
    assert rng.randbytes(8) == steered.randbytes(8)
    assert rng.draws_left == 4


def test_fuzz_with_no_options_fuzzes_every_layer(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without --layer: every layer (no --impl), the layers above a queue (a queue's
    --impl, as its gate runs them), or the --impl's own layer; each a campaign."""
    from rmqsim.conformance import stateful

    fuzzed: list[tuple[str, str]] = []
    real = stateful.fuzz

    def spy(impl: str, **options: object) -> object:
        fuzzed.append((str(options["layer"]), impl))
        return real(impl, **{**options, "examples": 2, "steps": 3})  # type: ignore[arg-type]

    monkeypatch.setattr(stateful, "fuzz", spy)
    done = CliRunner().invoke(cli, ["fuzz"])
    assert done.exit_code == 0, done.output
    assert [layer for layer, _ in fuzzed] == ["queue", "consumer", "stream", "store"]
    assert "no failure found (queue, consumer, stream, store)" in done.output
    assert "open_store, store layer" in done.output  # the store fuzzed is ours
    fuzzed.clear()
    assert CliRunner().invoke(cli, ["fuzz", "--impl", "commitlog"]).exit_code == 0
    assert [layer for layer, _ in fuzzed] == ["queue", "consumer", "stream"]
    fuzzed.clear()
    assert CliRunner().invoke(cli, ["fuzz", "--impl", "commitlog-store"]).exit_code == 0
    assert [layer for layer, _ in fuzzed] == ["store"]


@pytest.mark.parametrize("name", STORE_MUTANTS)
def test_the_store_fuzz_at_its_default_steps_catches_what_the_gate_does(name: str) -> None:
    """The store layer's examples run ``fuzz_steps_factor`` times the profile's steps (200
    at ci): retention's minimum needs simulated time. Bounded here to 40 examples (the
    default campaign, 800, finds each too: the report of issue 38 says after how many)."""
    (mutant,) = select([name])
    done = fuzz(mutant.impl, layer="store", examples=40)
    assert done.max_steps == 200 and done.failure is not None, name
    trace = parse_run_lines(done.failure.trace_lines)
    again = replay_run_trace(trace, impl=mutant.impl)
    assert again.status == "divergence" and again.anomaly == done.failure.anomaly
    # (Not replayed on our store: a store trace's failing run does not replay on the
    # correct store, the gate's neither: trace-mismatch at a retain; issue 38's report.)


@pytest.mark.parametrize("name", [CONSUMER_MUTANT, STREAM_MUTANT])
def test_the_default_fuzz_of_a_layer_catches_its_mutant_and_the_trace_replays(
    name: str, tmp_path: Path
) -> None:
    (mutant,) = select([name])
    fuzz_kill = fuzz_mutant(mutant, tmp_path)
    assert fuzz_kill.status == KILLED, fuzz_kill
    assert fuzz_kill.repro is not None and f"--layer {mutant.layer}" in fuzz_kill.repro
    assert fuzz_kill.trace is not None
    trace = read_run_trace(fuzz_kill.trace)
    assert trace.header.get("layer", "consumer") == mutant.layer
    assert trace.header["repro"] == fuzz_kill.repro
    # The trace replays: the mutant fails it again, the same way; our implementation
    # conforms to every recorded outcome.
    again = replay_file(fuzz_kill.trace, impl=mutant.impl)
    assert again.status == "divergence" and again.anomaly == fuzz_kill.anomaly
    assert replay_file(fuzz_kill.trace, impl=DEFAULT_IMPL).status == "ok"


def test_our_implementation_passes_a_layer_campaign() -> None:
    for layer in ("consumer", "stream", "store"):
        done = fuzz(layer=layer, profile="dev", seed=1, examples=20, steps=20)
        assert done.failure is None and done.examples >= 20 and done.steps > 0
        assert ({"start_client:ok", "open_consumer:ok", "put:ok"} & done.coverage), layer
    # A store's examples run operations (bodies are filler: no example overruns).
    assert done.steps >= done.examples


def test_cli_fuzzes_a_layer_and_writes_a_trace_replay_reproduces(tmp_path: Path) -> None:
    """The CLI's campaign writes a trace that replays; and a layer campaign is
    deterministic for its seed: the same campaign run again (``fuzz``, seed 0 as the CLI
    runs it) finds the failure at the same example and shrinks it to the same trace.
    (This replaced a separate determinism test that ran a seed-3 campaign twice.)"""
    (mutant,) = select([CONSUMER_MUTANT])
    runner = CliRunner()
    done = runner.invoke(
        cli, ["fuzz", "--layer", "consumer", "--impl", mutant.impl, "--out", str(tmp_path)]
    )
    assert done.exit_code == 1, done.output
    assert "consumer layer" in done.output and "shrunk program" in done.output
    (trace,) = tmp_path.glob("*.jsonl")
    replayed = runner.invoke(cli, ["replay", str(trace), "--impl", mutant.impl])
    assert replayed.exit_code == 1, replayed.output
    again = fuzz(mutant.impl, layer="consumer", seed=0)
    assert again.failure is not None
    assert f"after {again.examples_to_find} example(s)" in done.output, done.output
    assert trace.read_text().splitlines() == list(again.failure.trace_lines)


def test_cli_refuses_an_unknown_layer_or_a_stream_profile(tmp_path: Path) -> None:
    runner = CliRunner()
    for args in (["--layer", "storage"], ["--profile", "stream-seek"]):
        done = runner.invoke(cli, ["fuzz", *args, "--out", str(tmp_path)])
        assert done.exit_code == 2, done.output
        assert "Traceback" not in done.output
