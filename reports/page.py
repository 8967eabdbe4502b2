"""The report's HTML page: one self-contained file made from the JSON summary.

Every string on the page (profile names, signatures, details with topic names and
payload fragments taken from traces) goes through Jinja2's autoescaping; the charts are
``data:`` images; a Content-Security-Policy forbids scripts outright, so even a mistake in
escaping could not run one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined

from rmqsim.reports import plots
from rmqsim.reports.aggregate import MAX_SIGNATURES

__all__ = ["chart_uris", "render_html", "write_html"]


def _environment() -> Environment:
    return Environment(
        loader=PackageLoader("rmqsim.reports", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def chart_uris(summary: dict[str, Any]) -> dict[str, str | None]:
    """The page's charts (None where there is nothing to draw)."""
    by_config = {k: v for k, v in summary["by_config"].items() if v}
    wall = summary["wall_time_s"]["by_profile"]
    return {
        "profiles": plots.runs_by_profile(summary["by_profile"]) if summary["by_profile"] else None,
        "failures": plots.failures_by_signature(summary["failures"])
        if summary["failures"]
        else None,
        "ops": plots.op_coverage(summary["coverage"]["op_kinds"]),
        "config": plots.failure_rate_by_config(by_config) if by_config else None,
        "wall": plots.wall_time(wall) if wall else None,
    }


def render_html(summary: dict[str, Any]) -> str:
    template = _environment().get_template("report.html")
    return template.render(s=summary, plots=chart_uris(summary), max_signatures=MAX_SIGNATURES)


def write_html(summary: dict[str, Any], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(summary), encoding="utf-8")
    return path
