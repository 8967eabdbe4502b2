"""The report's charts: matplotlib figures rendered to SVG and embedded as ``data:`` URIs.

Why ``<img src="data:image/svg+xml;base64,...">`` rather than inline ``<svg>``: the page
stays one self-contained file, and a chart whose labels come from traces (signatures,
profile names) is an image, which a browser never runs scripts in, whatever the labels say.
Text is drawn as paths, so the charts look the same without the fonts installed.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

__all__ = [
    "BAR_WIDTH",
    "COLOR_FAILED",
    "COLOR_NEVER",
    "COLOR_RUNS",
    "MAX_LABEL_CHARS",
    "failure_rate_by_config",
    "failures_by_signature",
    "op_coverage",
    "runs_by_profile",
    "svg_data_uri",
    "wall_time",
]

#: Longest label drawn on an axis (characters); the tables show the full text.
MAX_LABEL_CHARS = 48
COLOR_RUNS = "#4c72b0"
COLOR_FAILED = "#c44e52"
COLOR_NEVER = "#bbbbbb"
#: The width of each of a profile's two bars (runs, failed), side by side.
BAR_WIDTH = 0.4


def _label(text: Any) -> str:
    text = str(text)
    return text if len(text) <= MAX_LABEL_CHARS else text[: MAX_LABEL_CHARS - 1] + "…"


def svg_data_uri(figure: Any) -> str:
    """The figure as a base64 SVG ``data:`` URI; the figure is closed."""
    buffer = io.BytesIO()
    with plt.rc_context({"svg.fonttype": "path", "svg.hashsalt": "rmqsim"}):
        figure.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(figure)
    return "data:image/svg+xml;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _barh(
    labels: Sequence[Any], values: Sequence[float], title: str, colors: Any, xlabel: str
) -> Figure:
    height = max(1.6, 0.32 * len(labels) + 0.8)
    figure, axes = plt.subplots(figsize=(7.5, height))
    positions = range(len(labels))
    axes.barh(list(positions), list(values), color=colors)
    axes.set_yticks(list(positions), [_label(label) for label in labels])
    axes.invert_yaxis()
    axes.set_title(title)
    axes.set_xlabel(xlabel)
    axes.grid(axis="x", alpha=0.3)
    return figure


def runs_by_profile(rows: Sequence[dict[str, Any]]) -> str:
    """Runs and failed runs per profile, side by side (drawn over each other, a profile
    whose every run failed would hide its runs bar)."""
    figure, axes = plt.subplots(figsize=(7.5, 3.2))
    names = [_label(r["value"]) for r in rows]
    positions = list(range(len(rows)))
    axes.bar([p - BAR_WIDTH / 2 for p in positions], [r["runs"] for r in rows],
             width=BAR_WIDTH, color=COLOR_RUNS, label="runs")
    axes.bar([p + BAR_WIDTH / 2 for p in positions], [r["failed"] for r in rows],
             width=BAR_WIDTH, color=COLOR_FAILED, label="failed")
    axes.set_xticks(positions, names, rotation=20, ha="right")
    axes.set_title("Runs and failures by profile")
    axes.legend()
    axes.grid(axis="y", alpha=0.3)
    return svg_data_uri(figure)


def failures_by_signature(failures: Sequence[dict[str, Any]], limit: int = 20) -> str:
    shown = list(failures)[:limit]
    figure = _barh(
        [f["signature"] for f in shown],
        [f["count"] for f in shown],
        "Failures by anomaly signature",
        COLOR_FAILED,
        "failing runs",
    )
    return svg_data_uri(figure)


def op_coverage(op_kinds: Sequence[dict[str, Any]]) -> str:
    counts = [k["count"] for k in op_kinds]
    figure = _barh(
        [k.get("label", k["kind"]) for k in op_kinds],
        counts,
        "Operations executed by kind (grey: never)",
        [COLOR_RUNS if c else COLOR_NEVER for c in counts],
        "operations",
    )
    return svg_data_uri(figure)


def wall_time(by_profile: dict[str, dict[str, float]]) -> str:
    """Wall-time percentiles per profile (grouped bars)."""
    figure, axes = plt.subplots(figsize=(7.5, 3.2))
    names = list(by_profile)
    keys = [k for k in ("p50", "p90", "p99") if all(k in v for v in by_profile.values())]
    width = 0.8 / max(1, len(keys))
    for i, key in enumerate(keys):
        axes.bar(
            [p + i * width for p in range(len(names))],
            [by_profile[n][key] for n in names],
            width=width,
            label=key,
        )
    axes.set_xticks(
        [p + width * (len(keys) - 1) / 2 for p in range(len(names))],
        [_label(n) for n in names],
        rotation=20,
        ha="right",
    )
    axes.set_ylabel("seconds per run")
    axes.set_title("Wall time per run (percentiles)")
    axes.legend()
    axes.grid(axis="y", alpha=0.3)
    return svg_data_uri(figure)


def failure_rate_by_config(by_config: dict[str, list[dict[str, Any]]]) -> str:
    """One panel per config dimension: failure rate per value (bar), runs in the label."""
    knobs = [k for k, rows in by_config.items() if rows]
    figure, axes_list = plt.subplots(
        len(knobs), 1, figsize=(7.5, 2.2 * max(1, len(knobs))), squeeze=False
    )
    for axes, knob in zip((a[0] for a in axes_list), knobs, strict=True):
        rows = by_config[knob]
        axes.bar(
            range(len(rows)),
            [100 * r["failure_rate"] for r in rows],
            color=COLOR_FAILED,
        )
        axes.set_xticks(
            range(len(rows)),
            [f"{_label(r['value'])}\n({r['runs']})" for r in rows],
            fontsize=7,
        )
        axes.set_ylim(0, max(1.0, 115 * max(r["failure_rate"] for r in rows)))
        axes.set_ylabel("% failed")
        axes.set_title(f"Failure rate by {knob} (runs in brackets)", fontsize=9)
        axes.grid(axis="y", alpha=0.3)
    figure.tight_layout()
    return svg_data_uri(figure)
