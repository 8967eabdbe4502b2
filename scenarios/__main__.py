"""Look at a simulation without a queue: ``python -m rmqsim.scenarios [--profile P] ...``.

With a trivial executor (every operation "succeeds" with no value) this prints the steps as
JSON lines (``--jsonl``), a count per kind (default), or the scenario side's own throughput
(``--bench``), which is the per-operation overhead a lockstep run pays on top of the queues.
The trivial executor's outcomes are not what a queue would return, so the op mix differs a
little from a real run (actors believe every create succeeded, even with invalid names).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter

from rmqsim.scenarios.catalog import queue_profile
from rmqsim.scenarios.queue.ops import OP_KINDS, Outcome, Step, step_to_json
from rmqsim.scenarios.queue.profiles import PROFILES, ProfileError
from rmqsim.scenarios.queue.sim import Simulation

__all__ = ["main"]

_OK = Outcome()


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code (0 ok, 2 bad usage)."""
    parser = argparse.ArgumentParser(prog="python -m rmqsim.scenarios", description=__doc__)
    parser.add_argument("--profile", default="smoke", help=f"one of: {', '.join(PROFILES)}")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=None, help="default: the profile's budget")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--jsonl", action="store_true", help="print every step as a JSON line")
    mode.add_argument("--bench", action="store_true", help="print steps per second")
    mode.add_argument("--profile-json", action="store_true", help="print the resolved profile")
    args = parser.parse_args(argv)
    try:
        simulation = Simulation(queue_profile(args.profile), args.seed, args.steps)
    except (ProfileError, ValueError, TypeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.profile_json:
        # ASCII escapes: the invalid-name pool holds a lone surrogate, unwritable as UTF-8.
        print(json.dumps(simulation.profile.to_json(), indent=2))
        return 0
    if args.jsonl:

        def execute(step: Step) -> Outcome:
            print(json.dumps(step_to_json(step)))
            return _OK

        simulation.run(execute)
        return 0
    kinds: Counter[str] = Counter()
    if args.bench:
        started = time.perf_counter()
        count = simulation.run(lambda step: _OK)
        elapsed_s = time.perf_counter() - started
        print(
            f"{args.profile} seed {args.seed}: {count} steps in {elapsed_s:.3f} s = "
            f"{count / elapsed_s:,.0f} steps/s (trivial executor)"
        )
        return 0
    count = simulation.run(lambda step: (kinds.update((step.op.kind,)), _OK)[1])
    print(f"{args.profile} seed {args.seed}: {count} steps, clock {simulation.clock_s()} s")
    for kind in OP_KINDS:
        print(f"  {kind:15} {kinds[kind]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
