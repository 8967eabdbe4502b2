"""What two gate runs' outputs must agree on: ``summary.json`` and ``junit.xml`` with
their wall times taken out (a parallel gate and a serial one, or a gate run twice)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

__all__ = ["without_times"]


def without_times(out: Path) -> tuple[dict[str, Any], str]:
    """The gate's summary and JUnit XML under ``out``, without their wall times."""
    summary = json.loads((out / "summary.json").read_text())
    for profile in summary["profiles"].values():
        profile.pop("wall_s")
    for sweep in summary["crash_sweep"].values():
        sweep.pop("wall_s")
    junit = re.sub(r' time="[0-9.]+"', "", (out / "junit.xml").read_text())
    return summary, junit
