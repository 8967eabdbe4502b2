"""Traces: one run as JSON Lines, replayable and byte-identical for the same code and seed.

Layout (one JSON object per line, keys sorted, no spaces, UTF-8):

1. header: ``{"type": "header", "format": "rmqsim-trace", "version": 1, "seed", "profile",
   "profile_config", "config", "impl", "versions", "git_commit", ...}``
2. one line per operation: ``{"type": "step", "i", "t", "actor", "op", "outcome"}`` plus
   ``"crash"`` when a crash was injected inside it and ``"sut_outcome"`` at a divergence;
3. end: ``{"type": "end", "steps", "status", "anomaly", "state_digest"}``; required, and
   ``steps`` must count the step lines, so a truncated trace is an error, never a shorter
   run that passes.

Lines are ASCII: non-ASCII characters are ``\\uXXXX`` escapes, so that names that are not
valid UTF-8 (lone surrogates, which scenarios use to test rejection) survive. Bytes are
base64, never pickled. The reader is strict: anything malformed raises
``TraceFormatError`` naming the file and line.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scenarios.ops import Op, OpDecodeError, Outcome, op_from_json, outcome_from_json

FORMAT = "rmqsim-trace"
FORMAT_VERSION = 1
#: Largest trace line accepted, in bytes (a produce of many big payloads is the largest).
MAX_LINE_BYTES = 256 * 1024 * 1024


class TraceFormatError(Exception):
    """A trace file is malformed; ``str()`` is one line naming the file and line."""

    def __init__(self, path: Path | str, line: int | None, message: str) -> None:
        where = f"{path}:{line}" if line is not None else f"{path}"
        super().__init__(f"{where}: {message}")
        self.path = str(path)
        self.line = line


#: One encoder for every line: ``json.dumps`` with options builds a new one per call.
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def dumps(obj: Any) -> str:
    """The one canonical JSON encoding used for every trace line."""
    return _ENCODER.encode(obj)


@dataclass(frozen=True, slots=True)
class TraceStep:
    """One recorded operation."""

    index: int
    time_s: int
    actor: str
    op: Op
    outcome: Outcome | None
    crash: dict[str, Any] | None = None
    #: The number of the line it was parsed from (None for a step built in code): what a
    #: check made after parsing, one that needs more than this line (a consumer trace's
    #: header says each client's mode), names in its ``TraceFormatError``. Not compared:
    #: the same step is the same wherever it was read from.
    line: int | None = field(default=None, compare=False)


@dataclass(slots=True)
class Trace:
    """A parsed trace."""

    header: dict[str, Any]
    steps: list[TraceStep] = field(default_factory=list)
    end: dict[str, Any] | None = None
    path: str = "<memory>"


#: Decoders of a step's ``op`` and ``outcome`` (the queue's vocabulary by default; the
#: consumer runner passes its own). They raise ``ValueError``/``TypeError`` on bad input.
OpDecoder = Callable[[object], Any]
OutcomeDecoder = Callable[[object], Outcome]


def parse_lines(
    lines: Iterable[str],
    path: Path | str = "<memory>",
    *,
    decode_op: OpDecoder = op_from_json,
    decode_outcome: OutcomeDecoder = outcome_from_json,
) -> Trace:
    """Parse trace lines; raise ``TraceFormatError`` on the first bad one."""
    trace: Trace | None = None
    last = 0  # the number of the last line that held something
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        if len(raw) > MAX_LINE_BYTES:
            raise TraceFormatError(path, number, f"line longer than {MAX_LINE_BYTES} bytes")
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise TraceFormatError(path, number, f"not valid JSON ({exc.msg})") from None
        if not isinstance(obj, dict):
            raise TraceFormatError(path, number, "a trace line must be a JSON object")
        kind = obj.get("type")
        if trace is None:
            if kind != "header":
                raise TraceFormatError(path, number, "the first line must be the header")
            if obj.get("format") != FORMAT:
                raise TraceFormatError(path, number, f"not an {FORMAT} file")
            version = obj.get("version")
            if type(version) is not int:
                raise TraceFormatError(
                    path, number, f"format version must be an integer, got {version!r}"
                )
            if version != FORMAT_VERSION:
                raise TraceFormatError(
                    path,
                    number,
                    f"format version {version} is not supported "
                    f"(this rmqsim reads version {FORMAT_VERSION})",
                )
            for key, want in (("seed", int), ("config", dict), ("profile", str)):
                if not isinstance(obj.get(key), want) or isinstance(obj.get(key), bool):
                    raise TraceFormatError(
                        path, number, f"header field {key!r} is missing or wrong"
                    )
            if not isinstance(obj.get("impl", ""), str):
                raise TraceFormatError(path, number, "header field 'impl' must be a string")
            trace = Trace(header=obj, path=str(path))
            last = number
            continue
        if trace.end is not None:
            raise TraceFormatError(path, number, "content after the end line")
        if kind == "step":
            step = _parse_step(obj, path, number, len(trace.steps) + 1, decode_op, decode_outcome)
            trace.steps.append(step)
        elif kind == "end":
            if obj.get("steps") != len(trace.steps):
                raise TraceFormatError(
                    path,
                    number,
                    f"the end line says {obj.get('steps')!r} steps but the trace holds "
                    f"{len(trace.steps)}: steps are missing or were added",
                )
            trace.end = obj
        else:
            raise TraceFormatError(path, number, f"unknown line type {kind!r}")
        last = number
    if trace is None:
        raise TraceFormatError(path, None, "empty file: no header")
    if trace.end is None:
        raise TraceFormatError(
            path,
            last + 1,
            f"no end line after step {len(trace.steps)}: the trace is truncated",
        )
    return trace


def _parse_step(
    obj: dict[str, Any],
    path: Path | str,
    number: int,
    expect: int,
    decode_op: OpDecoder,
    decode_outcome: OutcomeDecoder,
) -> TraceStep:
    index, time_s, actor = obj.get("i"), obj.get("t"), obj.get("actor")
    if type(index) is not int or index != expect:
        raise TraceFormatError(path, number, f"step index must be {expect}, got {index!r}")
    if type(time_s) is not int:
        raise TraceFormatError(path, number, f"step time 't' must be an int, got {time_s!r}")
    if not isinstance(actor, str):
        raise TraceFormatError(path, number, "step 'actor' must be a string")
    try:
        op = decode_op(obj.get("op"))
        outcome = decode_outcome(obj["outcome"]) if obj.get("outcome") is not None else None
    except (OpDecodeError, KeyError, TypeError, ValueError) as exc:
        raise TraceFormatError(path, number, f"bad operation: {exc}") from None
    crash = obj.get("crash")
    if crash is not None and not isinstance(crash, dict):
        raise TraceFormatError(path, number, "'crash' must be an object")
    return TraceStep(index, time_s, actor, op, outcome, crash, number)


def read_trace(
    path: Path | str,
    *,
    decode_op: OpDecoder = op_from_json,
    decode_outcome: OutcomeDecoder = outcome_from_json,
) -> Trace:
    """Read and parse a trace file; unreadable or malformed files raise TraceFormatError."""
    try:
        with open(path, encoding="utf-8") as handle:
            return parse_lines(handle, path, decode_op=decode_op, decode_outcome=decode_outcome)
    except UnicodeDecodeError as exc:
        raise TraceFormatError(path, None, f"not UTF-8 text ({exc.reason})") from None
    except OSError as exc:
        raise TraceFormatError(path, None, f"cannot read: {exc.strerror or exc}") from None


def write_lines(path: Path, lines: list[str]) -> None:
    """Write trace lines atomically (temp file + rename), so a reader never sees half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    tmp.replace(path)
