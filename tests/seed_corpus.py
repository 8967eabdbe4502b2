"""Seed the regression corpus: fuzz every wrong model and save what it finds.

Run from the repository root: ``python -m tests.seed_corpus [DIR]`` (default
``regressions``). Deterministic (fixed seeds), so re-running it re-creates the same files.
A found trace is kept only if it replays clean on our implementation and fails again, with
the same anomaly, on the wrong model it came from: that is what the corpus tests check.
"""

from __future__ import annotations

import sys
from pathlib import Path

from rmqsim.conformance.adapter import DEFAULT_IMPL, make_model_factory
from rmqsim.conformance.running.corpus import DEFAULT_CORPUS, save_regression
from rmqsim.conformance.running.run import replay_trace
from rmqsim.conformance.running.trace import parse_lines
from rmqsim.conformance.searching.stateful import fuzz
from tests import fuzz_wrong_models, wrong_models

#: Budget per wrong model: examples and steps of the campaign, and the seeds tried.
EXAMPLES = 400
STEPS = 50
SEEDS = range(3)

WRONG = [
    *(cls for cls in wrong_models.EXPECTED),
    fuzz_wrong_models.SeekRedelivers,
]


def origin(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def main(directory: Path) -> int:
    for cls in WRONG:
        factory = make_model_factory(cls)
        for seed in SEEDS:
            found = fuzz(factory, profile="ci", examples=EXAMPLES, steps=STEPS, seed=seed)
            failure = found.failure
            if failure is None:
                print(f"{cls.__name__} seed {seed}: nothing found", flush=True)
                continue
            trace = parse_lines(failure.trace_lines)
            clean = replay_trace(trace, impl=DEFAULT_IMPL)
            again = replay_trace(trace, impl=factory)
            if not clean.ok or again.anomaly != failure.anomaly:
                print(
                    f"{cls.__name__} seed {seed}: {failure.anomaly} not kept (impl: "
                    f"{clean.anomaly or 'clean'}, origin: {again.anomaly or 'clean'})",
                    flush=True,
                )
                continue
            path = save_regression(failure, directory, found_on=origin(cls))
            print(f"{cls.__name__} seed {seed}: {failure.steps} steps -> {path}", flush=True)
            break
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_CORPUS))
