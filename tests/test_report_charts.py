"""The report's runs-and-failures chart keeps its runs bar visible where every run of a
profile failed (the two bars side by side, not drawn over each other)."""

from __future__ import annotations

import base64
import re

from rmqsim.reports.plots import COLOR_FAILED, COLOR_RUNS, runs_by_profile


def _bars(svg: str, colour: str) -> list[tuple[float, float, float]]:
    """(left, right, height) of each filled rectangle of ``colour`` in the chart."""
    found = []
    for d, style in re.findall(r'<path d="([^"]+)"[^>]*style="([^"]*)"', svg):
        if f"fill: {colour}" not in style:
            continue
        xs = [float(v) for v in re.findall(r"[ML]\s*([-\d.]+)\s+[-\d.]+", d)]
        ys = [float(v) for v in re.findall(r"[ML]\s*[-\d.]+\s+([-\d.]+)", d)]
        if len(xs) >= 4:
            found.append((min(xs), max(xs), max(ys) - min(ys)))
    return found


def test_a_profile_whose_every_run_failed_still_shows_its_runs_bar() -> None:
    uri = runs_by_profile([{"value": "smoke", "runs": 30, "failed": 30},
                           {"value": "crashy", "runs": 30, "failed": 0}])  # fmt: skip
    svg = base64.b64decode(uri.split(",", 1)[1]).decode()
    runs, failed = _bars(svg, COLOR_RUNS), _bars(svg, COLOR_FAILED)
    tallest_run = max(runs, key=lambda bar: bar[2])
    tallest_failed = max(failed, key=lambda bar: bar[2])
    assert abs(tallest_run[2] - tallest_failed[2]) < 0.5  # smoke: 30 runs, 30 failed
    # Side by side: neither bar covers the other.
    assert tallest_run[1] <= tallest_failed[0] + 0.01 or tallest_failed[1] <= tallest_run[0] + 0.01
