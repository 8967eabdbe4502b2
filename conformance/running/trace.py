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
``TraceFormatError`` naming the file and line. That includes what would otherwise let an
edited trace check less than it says: a step or end line with a field missing or one it
does not know (a renamed ``outcome`` is not an unrecorded one), a header field rmqsim
does not write (``HEADER_FIELDS``), an outcome left unrecorded (``null``) anywhere but on
the diverging last step, an end line that says ``ok`` without its final ``state_digest``.
Values are plain JSON: integers of at most ``MAX_INT_DIGITS`` digits, no ``NaN`` or
infinities, nesting within Python's recursion limit (a deeper line is refused, not a crash
of the reader).
"""

from __future__ import annotations

import errno
import itertools
import json
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from rmqsim.conformance.crashing.crash_record import CrashRecord, CrashRecordError
from rmqsim.scenarios.queue.ops import Op, OpDecodeError, Outcome, op_from_json, outcome_from_json

__all__ = [
    "DIGEST_PATTERN",
    "END_FIELDS",
    "END_OPTIONAL_FIELDS",
    "END_STATUSES",
    "FORMAT",
    "FORMAT_VERSION",
    "HEADER_FIELDS",
    "MAX_INT_DIGITS",
    "MAX_LINE_BYTES",
    "STEP_FIELDS",
    "STEP_OPTIONAL_FIELDS",
    "TIME_LIMIT_S",
    "ChooseDecoders",
    "OpDecoder",
    "OutcomeDecoder",
    "Trace",
    "TraceFormatError",
    "TraceStep",
    "bounded_lines",
    "dumps",
    "output_problem",
    "parse_lines",
    "read_lines",
    "read_trace",
    "write_lines",
]

FORMAT = "rmqsim-trace"
FORMAT_VERSION = 1
#: Largest trace line accepted, in bytes (a produce of many big payloads is the largest).
MAX_LINE_BYTES = 256 * 1024 * 1024
#: The fields of a step line: always present, and present only when they say something.
STEP_FIELDS = frozenset({"type", "i", "t", "actor", "op", "outcome"})
STEP_OPTIONAL_FIELDS = frozenset({"crash", "sut_outcome"})
#: The fields of the end line (``steps`` alone ends a hand-cut prefix).
END_FIELDS = frozenset({"type", "steps"})
END_OPTIONAL_FIELDS = frozenset({"status", "anomaly", "state_digest"})
#: Every field a header may hold: what ``layer.RunSpec.to_header`` writes (``layer``:
#: the layer's name, in the headers of layers other than the queue and the consumer;
#: crash rate and mode, a crash sweep's first-open crash, the fuzzer's and the corpus's
#: repro and origin, a shrink's origin, a consumer trace's final check). A field that is
#: not here is refused: a renamed ``open_crash`` must not replay as a trace without one.
#: Code that writes a new header field adds it here.
HEADER_FIELDS = frozenset(
    {
        "type", "format", "version", "seed", "profile", "profile_config", "config", "impl",
        "steps", "versions", "git_commit", "layer", "crash_rate", "crash_mode", "open_crash",
        "repro", "found_on", "final_check", "shrunk_from_steps", "crash_sweep",
    }
)  # fmt: skip
#: An end line's ``status`` values.
END_STATUSES = ("ok", "divergence")
#: What ``statediff.state_digest`` writes.
DIGEST_PATTERN = re.compile(r"sha256:[0-9a-f]{64}")
#: Most digits of an integer in a trace: the fuzzer draws arguments up to 2**128 (39
#: digits), the scenarios up to 2**64, to test how a queue rejects them. A longer one is
#: refused before Python converts it (which costs time, and fails past 4,300 digits).
MAX_INT_DIGITS = 40
#: A step's simulated time ``t`` is below this (a signed 64-bit integer of seconds).
TIME_LIMIT_S = 2**63


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
    crash: CrashRecord | None = None
    #: The number of the line it was parsed from (None for a step built in code): what a
    #: check made after parsing, one that needs more than this line (a consumer trace's
    #: header says each client's mode), names in its ``TraceFormatError``. Not compared:
    #: the same step is the same wherever it was read from.
    line: int | None = field(default=None, compare=False)
    #: Whether the line recorded the SUT's outcome (a divergence's last step).
    sut_outcome: bool = field(default=False, compare=False)


@dataclass(slots=True)
class Trace:
    """A parsed trace."""

    header: dict[str, Any]
    steps: list[TraceStep] = field(default_factory=list)
    end: dict[str, Any] | None = None
    path: str = "<memory>"
    #: The number of the end line in the file it was parsed from (None: built in code).
    end_line: int | None = None


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
        obj = _load_line(raw, path, number)
        kind = obj.get("type")
        if trace is None:
            trace = Trace(header=_parse_header(obj, path, number), path=str(path))
        elif trace.end is not None:
            raise TraceFormatError(path, number, "content after the end line")
        elif kind == "step":
            expect = len(trace.steps) + 1
            try:
                step = _parse_step(obj, path, number, expect, decode_op, decode_outcome)
            except RecursionError:
                raise TraceFormatError(path, number, "values nested too deeply") from None
            trace.steps.append(step)
        elif kind == "end":
            trace.end = _parse_end(obj, path, number, len(trace.steps))
            trace.end_line = number
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
    _check_unrecorded(trace)
    return trace


class _NotPlainJson(ValueError):
    """A value ``json`` would take but a trace never holds (see ``_load_line``)."""


def _bounded_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise _NotPlainJson(
            f"integer {text[:24]}... has {digits} digits (at most {MAX_INT_DIGITS})"
        )
    return int(text)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NotPlainJson(f"number {text[:24]} is out of range")
    return value


def _no_constant(name: str) -> Any:
    raise _NotPlainJson(f"{name} is not JSON")


def _load_line(raw: str, path: Path | str, number: int) -> dict[str, Any]:
    """One line as a JSON object of plain values, or ``TraceFormatError``."""
    if len(raw) > MAX_LINE_BYTES:
        raise TraceFormatError(path, number, f"line longer than {MAX_LINE_BYTES} bytes")
    try:
        obj = json.loads(
            raw, parse_int=_bounded_int, parse_float=_finite_float, parse_constant=_no_constant
        )
    except json.JSONDecodeError as exc:
        raise TraceFormatError(path, number, f"not valid JSON ({exc.msg})") from None
    except _NotPlainJson as exc:
        raise TraceFormatError(path, number, f"not a trace value: {exc}") from None
    except RecursionError:
        raise TraceFormatError(path, number, "JSON nested too deeply") from None
    if not isinstance(obj, dict):
        raise TraceFormatError(path, number, "a trace line must be a JSON object")
    return obj


def _check_fields(
    obj: Mapping[str, Any],
    path: Path | str,
    number: int,
    what: str,
    required: frozenset[str],
    optional: frozenset[str] = frozenset(),
) -> None:
    """``obj`` holds every ``required`` field and no field outside ``required | optional``."""
    missing = sorted(required.difference(obj))
    unknown = sorted(set(obj).difference(required, optional))
    problems = []
    if missing:
        problems.append(f"lacks field(s) {', '.join(missing)}")
    if unknown:
        problems.append(f"has unknown field(s) {', '.join(repr(k)[:60] for k in unknown[:5])}")
    if problems:
        raise TraceFormatError(path, number, f"{what} {' and '.join(problems)}")


def _parse_header(obj: dict[str, Any], path: Path | str, number: int) -> dict[str, Any]:
    if obj.get("type") != "header":
        raise TraceFormatError(path, number, "the first line must be the header")
    if obj.get("format") != FORMAT:
        raise TraceFormatError(path, number, f"not an {FORMAT} file")
    version = obj.get("version")
    if type(version) is not int:
        raise TraceFormatError(path, number, f"format version must be an integer, got {version!r}")
    if version != FORMAT_VERSION:
        raise TraceFormatError(
            path,
            number,
            f"format version {version} is not supported "
            f"(this rmqsim reads version {FORMAT_VERSION})",
        )
    for key, want in (("seed", int), ("config", dict), ("profile", str)):
        if not isinstance(obj.get(key), want) or isinstance(obj.get(key), bool):
            raise TraceFormatError(path, number, f"header field {key!r} is missing or wrong")
    if not isinstance(obj.get("impl", ""), str):
        raise TraceFormatError(path, number, "header field 'impl' must be a string")
    _check_fields(obj, path, number, "the header", frozenset(), HEADER_FIELDS)
    return obj


def _parse_end(obj: dict[str, Any], path: Path | str, number: int, steps: int) -> dict[str, Any]:
    if type(obj.get("steps")) is not int or obj["steps"] != steps:  # not True for 1
        raise TraceFormatError(
            path,
            number,
            f"the end line says {obj.get('steps')!r} steps but the trace holds "
            f"{steps}: steps are missing or were added",
        )
    _check_fields(obj, path, number, "the end line", END_FIELDS, END_OPTIONAL_FIELDS)
    status, digest = obj.get("status"), obj.get("state_digest")
    if "status" in obj and status not in END_STATUSES:
        raise TraceFormatError(
            path, number, f"end status must be 'ok' or 'divergence', got {status!r:.80}"
        )
    if digest is not None and not (type(digest) is str and DIGEST_PATTERN.fullmatch(digest)):
        raise TraceFormatError(
            path, number, f"end state_digest must be sha256:<64 hex>, got {digest!r:.80}"
        )
    if status == "ok" and digest is None:
        raise TraceFormatError(
            path, number, "an end line with status ok must record its state_digest"
        )
    if not isinstance(obj.get("anomaly"), str | None):
        raise TraceFormatError(path, number, "end anomaly must be a string or null")
    return obj


def _check_unrecorded(trace: Trace) -> None:
    """An outcome may go unrecorded (``null``), and a SUT's outcome be recorded, on the last
    step of a trace that ended in a divergence only: there the model's outcome may be
    unknown. Anywhere else, ``null`` would silently skip a comparison."""
    assert trace.end is not None
    ok = trace.end.get("status") == "ok"
    for step in trace.steps:
        last = step.index == len(trace.steps)
        if step.outcome is None and (ok or not last):
            raise TraceFormatError(
                trace.path,
                step.line,
                f"step {step.index}: outcome is null (unrecorded), which only the diverging "
                "last step of a failed run may be",
            )
        if step.sut_outcome and (ok or not last):
            raise TraceFormatError(
                trace.path,
                step.line,
                f"step {step.index}: sut_outcome is recorded only on the diverging last step",
            )


def _parse_step(
    obj: dict[str, Any],
    path: Path | str,
    number: int,
    expect: int,
    decode_op: OpDecoder,
    decode_outcome: OutcomeDecoder,
) -> TraceStep:
    _check_fields(obj, path, number, "a step line", STEP_FIELDS, STEP_OPTIONAL_FIELDS)
    index, time_s, actor = obj.get("i"), obj.get("t"), obj.get("actor")
    if type(index) is not int or index != expect:
        raise TraceFormatError(path, number, f"step index must be {expect}, got {index!r}")
    if type(time_s) is not int or not 0 <= time_s < TIME_LIMIT_S:
        raise TraceFormatError(
            path, number, f"step time 't' must be an int in [0, 2**63), got {time_s!r:.80}"
        )
    if not isinstance(actor, str):
        raise TraceFormatError(path, number, "step 'actor' must be a string")
    try:
        op = decode_op(obj.get("op"))
        outcome = decode_outcome(obj["outcome"]) if obj.get("outcome") is not None else None
    except (OpDecodeError, KeyError, TypeError, ValueError) as exc:
        raise TraceFormatError(path, number, f"bad operation: {exc}") from None
    crash, sut = obj.get("crash"), obj.get("sut_outcome")
    try:
        record = None if crash is None else CrashRecord.from_json(crash)
    except CrashRecordError as exc:
        raise TraceFormatError(path, number, f"step {index}: {exc}") from None
    if sut is not None and not isinstance(sut, dict):
        raise TraceFormatError(path, number, "'sut_outcome' must be an object")
    return TraceStep(index, time_s, actor, op, outcome, record, number, sut is not None)


#: Given a trace's first line, the decoder keywords of ``parse_lines`` for its vocabulary.
ChooseDecoders = Callable[[str], Mapping[str, Any]]


def read_trace(
    path: Path | str,
    *,
    decode_op: OpDecoder = op_from_json,
    decode_outcome: OutcomeDecoder = outcome_from_json,
    choose_decoders: ChooseDecoders | None = None,
) -> Trace:
    """Read and parse a trace file; unreadable or malformed files raise TraceFormatError.

    The file is read once, from start to end, so a pipe works (``/dev/stdin``, a shell's
    ``<(zcat trace.gz)``). ``choose_decoders``, given the first line, picks the
    vocabulary of the rest (a consumer trace's); it must not raise on any text."""
    try:
        with open(path, encoding="utf-8") as handle:
            lines = bounded_lines(handle, path)
            first = next(lines, "")
            decoders = {"decode_op": decode_op, "decode_outcome": decode_outcome}
            if choose_decoders is not None:
                decoders.update(choose_decoders(first))
            return parse_lines(itertools.chain([first], lines), path, **decoders)
    except UnicodeDecodeError as exc:
        raise TraceFormatError(path, None, f"not UTF-8 text ({exc.reason})") from None
    except OSError as exc:
        raise TraceFormatError(path, None, f"cannot read: {exc.strerror or exc}") from None


def bounded_lines(handle: IO[str], path: Path | str) -> Iterator[str]:
    """The lines of ``handle`` (with their line ends), each read with a bound: a line longer
    than ``MAX_LINE_BYTES`` (a file with no line end, ``/dev/zero``) raises
    ``TraceFormatError`` once that much is read, rather than filling the memory."""
    for number in itertools.count(1):
        line = handle.readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        if len(line) > MAX_LINE_BYTES:
            raise TraceFormatError(path, number, f"line longer than {MAX_LINE_BYTES} bytes")
        yield line


def read_lines(path: Path | str) -> list[str]:
    """The lines of the trace file at ``path``, read once from start to end (a pipe works);
    ``TraceFormatError`` naming the file when it cannot be read or is not UTF-8 text."""
    try:
        with open(path, encoding="utf-8") as handle:
            return [line.rstrip("\r\n") for line in bounded_lines(handle, path)]
    except UnicodeDecodeError as exc:
        raise TraceFormatError(path, None, f"not UTF-8 text ({exc.reason})") from None
    except OSError as exc:
        raise TraceFormatError(path, None, f"cannot read: {exc.strerror or exc}") from None


def write_lines(path: Path, lines: list[str]) -> None:
    """Write trace lines atomically (temp file + rename), so a reader never sees half; a
    write that fails (a full disk) removes its temporary file. A symbolic link at ``path``
    is written through (its target replaced, the link kept); anything else there that is
    not a regular file (a directory, a device, a FIFO) is refused with an ``OSError``
    (``output_problem`` names it) rather than renamed over."""
    if path.is_symlink():
        path = path.resolve()
    if path.exists() and not path.is_file():
        kind = "a directory" if path.is_dir() else "something other than a regular file"
        raise OSError(errno.EISDIR if path.is_dir() else errno.EEXIST,
                      f"{kind} is there: rmqsim writes a trace only in place of a regular "
                      "file", str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


#: ``errno`` values that say the machine could not store what rmqsim wrote: a full disk
#: or quota, a read-only file system, an I/O error, a file too big; or that the path is
#: not one a file can be written at: a directory or other non-file there, a file where a
#: directory must be. (Permissions are checked before a command runs: ``writable_dir``.)
_MACHINE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO, errno.EFBIG,
                             errno.EISDIR, errno.EEXIST, errno.ENOTDIR})


def output_problem(exc: BaseException) -> str | None:
    """``<path>: <reason>`` when ``exc`` is an output the machine refused to store (the
    machine's state, not a bug of rmqsim: never exit 3), else None."""
    if not isinstance(exc, OSError) or exc.errno not in _MACHINE_ERRNOS:
        return None
    reason = exc.strerror or str(exc)
    return f"{exc.filename}: {reason}" if exc.filename else reason
