"""The failure report: what a person needs to understand and reproduce a divergence in a
minute. Plain text (it goes to terminals, CI logs and JUnit XML alike)."""

from __future__ import annotations

import shlex
import unicodedata
from pathlib import Path
from typing import Any

from rmqsim.conformance.layer import layer_named
from rmqsim.conformance.reporting.anomalies import ANOMALIES
from rmqsim.conformance.running.run import RunResult, git_commit, parse_run_lines, versions
from rmqsim.conformance.running.statediff import clip
from rmqsim.scenarios.queue.ops import Outcome

__all__ = [
    "DEFAULT_OUTCOME_LABELS",
    "MAX_SHRUNK_LINES",
    "MAX_VALUE_CHARS",
    "OUTCOME_LABELS",
    "outcome_labels",
    "render_failure",
    "render_op",
    "render_outcome",
    "replay_command",
]

#: Longest rendering of one value in a report line.
MAX_VALUE_CHARS = 300
#: Most operations of a shrunk trace listed in a report.
MAX_SHRUNK_LINES = 25
#: What a divergence's two outcomes are (``expected``, ``actual``), by anomaly: the model's
#: and the SUT's, but for a replay whose model no longer returns what the trace recorded.
OUTCOME_LABELS = {"trace-mismatch": ("recorded", "model")}
DEFAULT_OUTCOME_LABELS = ("model", "sut")


def outcome_labels(anomaly: str) -> tuple[str, str]:
    """The labels of a divergence's expected and actual outcome in a report."""
    return OUTCOME_LABELS.get(anomaly, DEFAULT_OUTCOME_LABELS)


def _clip(text: str, limit: int = MAX_VALUE_CHARS) -> str:
    return clip(text, limit)


def _show_arg(value: Any) -> str:
    """``repr`` of an operation's argument; a string that Unicode normalization would change
    (a combining mark: ``u`` + U+0308) is shown with its escapes, so that it never looks the
    same as its precomposed twin (``ü``) in one report."""
    if isinstance(value, str) and not unicodedata.is_normalized("NFC", value):
        return ascii(value)
    return repr(value)


def render_op(op: Any) -> str:
    """A compact, readable rendering of an operation (payloads summarized)."""
    kind = op.kind
    fields = [name for name in getattr(op, "__slots__", ()) if name != "messages"]
    args = [f"{name}={_clip(_show_arg(getattr(op, name)), 80)}" for name in fields]
    if kind == "produce":
        sizes = [len(m.payload) for m in op.messages]
        args.append(f"{len(sizes)} messages, payload bytes {_clip(str(sizes), 60)}")
    return f"{kind}({', '.join(args)})"


def render_outcome(outcome: Outcome | None) -> str:
    if outcome is None:
        return "-"
    if outcome.error is not None:
        return f"error {outcome.error}"
    value = outcome.value
    if isinstance(value, tuple) and value and hasattr(value[0], "msg_id"):
        parts = [
            f"#{d.msg_id}({len(d.payload) if isinstance(d.payload, bytes) else d.payload!r}B)"
            for d in value
        ]
        return _clip("delivered " + " ".join(parts))
    return _clip(repr(value))


def replay_command(trace_path: Path | str, *more: str) -> str:
    """``rmqsim replay TRACE [MORE...]``, quoted for a POSIX shell (a path may hold spaces
    or quotes): a line a user can paste."""
    return shlex.join(["rmqsim", "replay", str(trace_path), *more])


def render_failure(result: RunResult) -> str:
    """The full report of a failed run."""
    div = result.divergence
    assert div is not None
    meaning = layer_named(result.spec.layer).anomalies.get(div.anomaly) or ANOMALIES.get(
        div.anomaly, ""
    )
    step = div.step
    expected, actual = outcome_labels(div.anomaly)
    lines = [
        f"DIVERGENCE {div.anomaly}: {meaning}",
        f"  profile {result.profile}  seed {result.seed}  impl {result.impl}",
        f"  step {div.step_index} of {result.steps}  t={step.time_s}s  actor {step.actor}",
        f"  operation  {render_op(step.op)}",
        f"  {expected:<10} {render_outcome(div.expected)}",
        f"  {actual:<10} {render_outcome(div.actual)}",
    ]
    if div.detail:
        lines.append(f"  detail     {div.detail}")
    lines.extend(f"  note       {note}" for note in result.notes)
    if div.diffs:
        lines.append("  state diff (only what differs; model = expected):")
        lines.extend(f"    {d.render()}" for d in div.diffs)
    ver = ", ".join(f"{k} {v}" for k, v in versions().items())
    commit = git_commit()
    lines.append(f"  versions   {ver}" + (f", commit {commit[:12]}" if commit else ""))
    if result.trace_path is not None:
        lines.append(f"  trace      {result.trace_path}")
    lines.append(f"  repro      {result.repro_command()}")
    if result.trace_path is not None and not result.replay_only:
        lines.append(f"             {replay_command(result.trace_path)}")
    shrunk = result.shrunk
    if shrunk is not None:
        lines.append(
            f"  shrunk     {result.steps} -> {shrunk.steps} operations, same anomaly "
            f"({shrunk.anomaly})"
        )
        if shrunk.shrink_stats is not None:
            lines.append(f"             {shrunk.shrink_stats.describe()}")
        if shrunk.trace_path is not None:
            lines.append(f"             {replay_command(shrunk.trace_path)}")
        lines.extend(
            f"    {step.index:>3} t={step.time_s}s {step.actor}: {render_op(step.op)}"
            for step in parse_run_lines(shrunk.trace_lines).steps[:MAX_SHRUNK_LINES]
        )
    return "\n".join(lines)
