"""MkDocs hook: the benchmark history page, drawn at build time from bench/history.jsonl.

``docs/bench-history.md`` holds the marker ``<!-- bench-history -->``; at build time it is
replaced by, for each figure of ``PLOTTED`` that has records, a small SVG chart of its
values by date (the target as a dashed line, a missed target's points in red) and a table of
its records. The records are those ``rmqsim bench --json`` writes (``conformance/
bench_data.py``); tests/test_docs_site.py tests ``render`` and builds the site."""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["MARKER", "PLOTTED", "load", "on_page_markdown", "render", "svg_chart"]

MARKER = "<!-- bench-history -->"
HISTORY = Path(__file__).resolve().parents[2] / "bench" / "history.jsonl"
#: The figures the page plots, in order (others stay in the data).
PLOTTED = (
    "lockstep.smoke.ops_per_s",
    "lockstep.smoke.slowdown_vs_sut",
    "lockstep.stream.slowdown_vs_sut",
    "produce.rocksmq.ratio",
    "produce.commitlog-async.ratio",
    "produce.commitlog-async.cpu_ratio",
    "produce.commitlog-async_vs_rocksmq.cpu",
    "consume.commitlog-async.ratio",
    "report.rows_10m.wall_s",
    "report.rows_1000.wall_s",
    "gate.jobs2_over_jobs1.wall",
    "tests.cpu_s",
)
WIDTH, HEIGHT, PAD = 560, 160, 36


def load(path: Path = HISTORY) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def svg_chart(rows: Sequence[dict[str, Any]]) -> str:
    """One figure's records (in date order) as an inline SVG: a point per record, a line
    through them, the target dashed."""
    values = [float(r["value"]) for r in rows]
    targets = [float(r["target"]) for r in rows if r["target"] is not None]
    low = min([*values, *targets, 0.0])
    high = max([*values, *targets]) or 1.0
    span = (high - low) or 1.0

    def x(i: int) -> float:
        return PAD + (WIDTH - 2 * PAD) * (i / max(len(rows) - 1, 1))

    def y(v: float) -> float:
        return HEIGHT - PAD + (v - low) / span * (2 * PAD - HEIGHT)

    points = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(values))
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
             f'role="img" aria-label="{html.escape(rows[0]["name"])}">',
             f'<polyline fill="none" stroke="#3f51b5" stroke-width="1.5" points="{points}"/>']
    for target in sorted(set(targets)):
        parts.append(f'<line x1="{PAD}" x2="{WIDTH - PAD}" y1="{y(target):.1f}" '
                     f'y2="{y(target):.1f}" stroke="#888" stroke-dasharray="4 3"/>')
        parts.append(f'<text x="{WIDTH - PAD + 2}" y="{y(target) + 4:.1f}" font-size="10">'
                     f'{target:g}</text>')
    for i, (row, value) in enumerate(zip(rows, values, strict=True)):
        colour = "#c62828" if row["met"] is False else "#3f51b5"
        parts.append(f'<circle cx="{x(i):.1f}" cy="{y(value):.1f}" r="3" fill="{colour}">'
                     f'<title>{html.escape(row["date"])}: {value:g}</title></circle>')
    first, last = html.escape(rows[0]["date"][:10]), html.escape(rows[-1]["date"][:10])
    parts.append(f'<text x="{PAD}" y="{HEIGHT - 8}" font-size="10">{first}'
                 f'</text><text x="{WIDTH - PAD}" y="{HEIGHT - 8}" font-size="10" '
                 f'text-anchor="end">{last}</text>')
    parts.append(f'<text x="4" y="{PAD - 10}" font-size="10">{high:g}</text>'
                 f'<text x="4" y="{HEIGHT - PAD + 4}" font-size="10">{low:g}</text></svg>')
    return "".join(parts)


def _table(rows: Sequence[dict[str, Any]]) -> list[str]:
    lines = ["| date | value | target | met | load | commit | source |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        side = "≥" if r["better"] == "higher" else "≤"
        target = "" if r["target"] is None else f"{side} {r['target']:g}"
        met = {True: "met", False: "missed", None: ""}[r["met"]]
        load = "" if not r["load_average"] else f"{r['load_average'][0]:g}"
        source = html.escape(str(r["params"].get("source", "rmqsim bench --json")))
        lines.append(f"| {r['date']} | {r['value']:g} {r['unit']} | {target} | {met} | {load} "
                     f"| {r['commit'] or ''} | {source} |")
    return lines


def render(records: Sequence[dict[str, Any]]) -> str:
    """The page's generated part: a section per plotted figure that has records."""
    out: list[str] = []
    for name in PLOTTED:
        rows = sorted((r for r in records if r["name"] == name), key=lambda r: r["date"])
        if not rows:
            continue
        out += [f"## `{name}` ({rows[0]['unit']})", "", svg_chart(rows), "", *_table(rows), ""]
    return "\n".join(out)


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, render(load()))
