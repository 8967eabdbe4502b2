"""What ``/proc/<pid>/stat`` says of a process: its fields, its CPU time, its start.

One reader for the places that ask (the FUSE mounts' registry, the power-loss sweep's
children's CPU, the bench's forked servers'): the command name (field 2) may hold spaces
and parentheses, so the fields are split after its closing parenthesis.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cpu_s", "start_ticks", "stat_fields"]

_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` from the third (``state``) on, or None when
    there is no such process (or no ``/proc``)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rfind(")") + 2 :].split()


def cpu_s(pid: int, *, reaped: bool = False) -> float | None:
    """CPU seconds (user and system) process ``pid`` has used so far, with ``reaped``
    those of the children it has waited for too; None when there is no such process."""
    fields = stat_fields(pid)
    if fields is None:
        return None
    return sum(int(field) for field in fields[11 : 15 if reaped else 13]) / _TICKS_PER_S


def start_ticks(pid: int) -> str | None:
    """The start time of process ``pid`` (clock ticks since boot), or None when there is
    no such process: with the pid, it names one process for good."""
    fields = stat_fields(pid)
    return fields[19] if fields is not None and len(fields) > 19 else None
