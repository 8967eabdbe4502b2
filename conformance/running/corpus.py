"""The regression corpus: every failure ever found, kept as a trace that must replay clean.

A corpus is a directory of ordinary traces named ``<anomaly>-<content hash 12>.jsonl``
(``regressions/`` at the root of the rmqsim repository; ``rmqsim gate`` and the test suite
replay it). The recorded outcomes in a trace are the reference model's, so a file replays
clean on a conforming implementation and fails on the one it was found on; that makes the
corpus useful to any implementation of the contract, not only to the one that failed.

The content hash covers what the program *is* (the queue config and each step's time,
actor and operation), not the outcomes, versions or commit in the file: saving the same
failure twice gives one file, whatever code found it.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from pathlib import Path

from rmqsim.conformance.adapter import DEFAULT_IMPL, BadImplError, Factory
from rmqsim.conformance.layer import layer_for_header
from rmqsim.conformance.running.run import RunResult, read_run_trace, replay
from rmqsim.conformance.running.run_result import failed_at_final_check
from rmqsim.conformance.running.trace import Trace, dumps, write_lines

__all__ = [
    "DEFAULT_CORPUS",
    "HASH_CHARS",
    "corpus_files",
    "program_digest",
    "regression_name",
    "replay_corpus",
    "replay_regression",
    "save_regression",
]

#: Where ``--save-regression`` writes and ``rmqsim gate`` reads, relative to the working
#: directory (the root of the repository whose implementation is gated).
DEFAULT_CORPUS = Path("regressions")
#: Hex digits of the content hash in a corpus file name.
HASH_CHARS = 12


def program_digest(trace_lines: list[str]) -> str:
    """Hash of the program a trace holds: config plus (time, actor, op) of every step."""
    digest = hashlib.sha256()
    for raw in trace_lines:
        line = json.loads(raw)
        if line["type"] == "header":
            digest.update(dumps(line["config"]).encode("utf-8"))
        elif line["type"] == "step":
            digest.update(dumps([line["t"], line["actor"], line["op"]]).encode("utf-8"))
    return digest.hexdigest()


def regression_name(result: RunResult) -> str:
    """``<anomaly>-<content hash>.jsonl`` for a failed run."""
    assert result.anomaly is not None, "only failures go into the corpus"
    return f"{result.anomaly}-{program_digest(result.trace_lines)[:HASH_CHARS]}.jsonl"


def save_regression(
    result: RunResult, directory: Path = DEFAULT_CORPUS, *, found_on: str | None = None
) -> Path:
    """Save a failed run into the corpus (once: an existing file with the same program is
    kept as it is) and return its path.

    The header names our implementation as the one to replay on by default (``rmqsim
    replay FILE`` then checks ours) and records where the failure was found in
    ``found_on`` (default: the run's implementation).
    """
    path = directory / regression_name(result)
    if path.exists():
        return path
    lines = list(result.trace_lines)
    header = json.loads(lines[0])
    assert header["type"] == "header"
    header["found_on"] = found_on or header.get("found_on") or header["impl"]
    header["impl"] = DEFAULT_IMPL
    if layer_for_header(header).final_check_needs_whole_run:
        # A trace that failed at a step stops there, without the rest of the run (a
        # consumer run's drain) that the final check needs: the file must still replay
        # clean on a conforming implementation.
        header["final_check"] = header.get("final_check", True) and failed_at_final_check(result)
    lines[0] = dumps(header)
    write_lines(path, lines)
    return path


def corpus_files(directory: Path) -> list[Path]:
    """The corpus's trace files, sorted by name (a stable test order)."""
    return sorted(directory.glob("*.jsonl")) if directory.is_dir() else []


def replay_regression(path: Path, impl: str | Factory = DEFAULT_IMPL) -> RunResult:
    """Replay one corpus file (of any layer) on ``impl``; the result names the file and
    how to repeat it."""
    return _replayed(path, read_run_trace(path), impl)


def _replayed(path: Path, trace: Trace, impl: str | Factory) -> RunResult:
    result = replay(trace, impl=impl)
    result.trace_path = path
    result.replay_only = True  # the repro below is the one command: no bare replay line
    command = ["rmqsim", "replay", str(path)]
    if impl != DEFAULT_IMPL:
        command += ["--impl", result.impl]
    result.repro = shlex.join(command)
    return result


def replay_corpus(directory: Path, impl: str | Factory = DEFAULT_IMPL) -> list[RunResult]:
    """Replay every file of the corpus that ``impl`` can replay, in name order: every
    file for a queue (ours runs the layers above it), the files of its own layer for a
    push consumer or a stream factory."""
    results = []
    for path in corpus_files(directory):
        trace = read_run_trace(path)
        try:
            layer_for_header(trace.header).resolve_impl(impl, for_replay=True)
        except BadImplError:  # a file of another layer than impl's
            continue
        results.append(_replayed(path, trace, impl))
    return results
