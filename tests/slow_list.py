"""The tests that ``./scripts/test.sh --quick`` leaves out: those of a second or more.

Every run records what each test took in pytest's cache (``tests/conftest.py``,
``DURATIONS_KEY``), and ``--quick`` reads the slow ones from there: your machine's own
timings, once the whole suite has run on it. Before that, it reads
``tests/slow_tests.txt``, which this module writes from the cache (or from a run's
``--durations=0`` output):

    ./scripts/test.sh                      # the whole suite, once
    python -m tests.slow_list              # tests/slow_tests.txt from the cache
    python -m tests.slow_list full.log     # ... or from --durations=0 output

A test's time is what pytest measured for it (its setup, call and teardown summed); a
module- or session-scoped fixture's setup counts for the first test that used it, so a
file whose fixture is slow is listed by its first test. So a file whose listed tests take
most of its time (``FILE_SHARE``) is listed whole, by its path: ``--quick`` leaves out all
of it rather than start its fixture again for the rest.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections import defaultdict
from pathlib import Path

__all__ = ["CACHE_PATH", "FILE_SHARE", "LIST_PATH", "THRESHOLD_S", "main", "parse_durations",
           "read_slow_entries", "read_slow_list", "slow_entries"]

LIST_PATH = Path(__file__).with_name("slow_tests.txt")
#: Where pytest's cache keeps the recorded durations (``conftest.DURATIONS_KEY``).
CACHE_PATH = Path(__file__).resolve().parent.parent / ".pytest_cache/v/rmqsim/durations"
#: A test at or over this many seconds is left out of the quick run.
THRESHOLD_S = 1.0
#: A file whose slow tests take at least this share of its time is listed whole.
FILE_SHARE = 0.5

_LINE = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s+(setup|call|teardown)\s+(\S.*?)\s*$")


def parse_durations(text: str) -> dict[str, float]:
    """node id -> seconds (setup + call + teardown) from ``--durations=0`` output."""
    seconds: dict[str, float] = defaultdict(float)
    for line in text.splitlines():
        match = _LINE.match(line)
        if match:
            seconds[match.group(3)] += float(match.group(1))
    return dict(seconds)


def read_slow_entries(path: Path | None = None) -> list[tuple[float, str]]:
    """(seconds, node id or file path) of each line of ``path`` (default:
    ``RMQSIM_SLOW_TESTS`` when set, else ``LIST_PATH``; none when it is missing), slowest
    first."""
    if path is None:
        path = Path(os.environ.get("RMQSIM_SLOW_TESTS", LIST_PATH))
    if not path.exists():
        return []
    entries = []
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            seconds, name = line.split(maxsplit=1)
            entries.append((float(seconds), name))
    return sorted(entries, key=lambda entry: -entry[0])


def read_slow_list(path: Path | None = None) -> frozenset[str]:
    """The node ids and file paths listed in ``path`` (as ``read_slow_entries``)."""
    return frozenset(name for _, name in read_slow_entries(path))


def slow_entries(durations: dict[str, float]) -> list[tuple[float, str]]:
    """(seconds, node id or file path) to leave out, slowest first."""
    per_file: dict[str, float] = defaultdict(float)
    slow_per_file: dict[str, float] = defaultdict(float)
    for node, seconds in durations.items():
        path = node.split("::", 1)[0]
        per_file[path] += seconds
        if seconds >= THRESHOLD_S:
            slow_per_file[path] += seconds
    whole = {path for path, s in slow_per_file.items() if s >= FILE_SHARE * per_file[path]}
    entries = [(per_file[path], path) for path in whole]
    entries += [(s, node) for node, s in durations.items()
                if s >= THRESHOLD_S and node.split("::", 1)[0] not in whole]
    return sorted(entries, reverse=True)


def _read_durations(argv: list[str]) -> dict[str, float]:
    """The durations of a log (``argv[0]``) or of the cache; OSError/ValueError says why
    there are none."""
    if argv:
        durations = parse_durations(Path(argv[0]).read_text())
        if not durations:
            raise ValueError(f"{argv[0]} holds no --durations=0 lines")
        return durations
    recorded = json.loads(CACHE_PATH.read_text())
    if not isinstance(recorded, dict) or not recorded:
        raise ValueError(f"{CACHE_PATH} holds no durations")
    return {str(node): float(seconds) for node, seconds in recorded.items()}


def main(argv: list[str]) -> int:
    if len(argv) > 1:
        print("usage: python -m tests.slow_list [DURATIONS_LOG]", file=sys.stderr)
        return 2
    try:
        durations = _read_durations(argv)
    except OSError as exc:
        print(f"slow_list: cannot read {exc.filename}: {exc.strerror} (run the whole suite "
              "first)", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"slow_list: {exc}", file=sys.stderr)
        return 2
    slow = slow_entries(durations)
    lines = [f"# Tests that took >= {THRESHOLD_S} s in a full run (tests/slow_list.py); "
             f"./scripts/test.sh --quick leaves them out. {len(slow)} of {len(durations)} "
             f"tests, {sum(s for s, _ in slow):.0f} of {sum(durations.values()):.0f} s."]
    lines += [f"{s:.2f} {node}" for s, node in slow]
    LIST_PATH.write_text("\n".join(lines) + "\n")
    print(f"wrote {LIST_PATH}: {len(slow)} tests", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
