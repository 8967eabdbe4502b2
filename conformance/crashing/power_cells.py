"""The power-loss cells of a storage backend: what the store was doing when the power went.

A queue's storage backend on rmqsim's simulated disk (``conformance.crashing.power_loss``) makes
changing file-system calls (*points*); a power cut is a case at one point in one fault
mode (``simdisk.FAULT_MODES``). A **cell** is (*kind*, mode): the kind names what the
store does at that point, from the call and the kind of path (docs/STORAGE.md,
"Power-loss cells"), for the commit log's layout (``impl.commitlog``: segments under
``commitlog/``, consume queues under ``consumequeue/``, the ``checkpoint`` written as
``checkpoint.tmp`` and renamed):

- ``POWER_CELL_KINDS`` names each kind and says what it is; ``point_kinds`` classifies the
  points of a run (a directory sync after a rename belongs to what was renamed, so the
  previous point counts). The points of the very first open are kind ``first-open``;
  paths the layout does not know (another backend's) are ``other``;
- a cell is *reachable* when its kind's calls allow the mode (``sync-error`` needs a sync
  point: ``SYNC_KINDS``), and *cut* when a case of a sweep ran at a point of that kind in
  that mode (``PowerSweepResult.cells``);
- ``power_cells_summary`` merges sweeps into ``summary.json``'s ``power_coverage`` (every
  cell with its count; the cells never cut, each with why), ``power_cells_lines`` prints it.
"""

from __future__ import annotations

import posixpath
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rmqsim.conformance.crashing.simdisk import FAULT_MODES, PointRecord

__all__ = [
    "FIRST_OPEN_KIND",
    "OTHER_KIND",
    "POWER_CELLS",
    "POWER_CELL_KINDS",
    "SYNC_KINDS",
    "cell_name",
    "point_kind",
    "point_kinds",
    "power_cells_lines",
    "power_cells_summary",
]

#: Every kind of point a cell is named by (in report order), with what the store does.
POWER_CELL_KINDS: dict[str, str] = {
    "segment-append": "an operation's records written into a commit-log segment",
    "segment-sync": "a commit-log segment synced",
    "segment-roll": "a new segment created and preallocated inside an operation (a roll)",
    "segment-dir-entry": "the commit log's directory synced inside an operation (a new or "
    "removed segment's directory entry made durable)",
    "checkpoint-write": "the checkpoint's temporary file created, written or synced",
    "checkpoint-rename": "the checkpoint renamed into place, or the store directory synced "
    "after it",
    "cq-write": "a consume-queue file written or synced",
    "cq-file": "a consume-queue file or directory created (a new topic; a file turned over)",
    "reclaim-delete": "a segment or a consume-queue file removed (retention's reclaim; a "
    "destroyed topic's files)",
    "markers": "the abort marker, the lock, the format file (a reopen's, a close's)",
}
#: The kinds whose points include syncs (the only kinds ``sync-error`` applies to).
SYNC_KINDS = frozenset({"segment-sync", "segment-dir-entry", "checkpoint-write",
                        "checkpoint-rename", "cq-write", "markers"})
#: The kind of every point of the first open (before step 1): not a cell.
FIRST_OPEN_KIND = "first-open"
#: The kind of a point on a path the commit log's layout does not know: not a cell.
OTHER_KIND = "other"
#: Every reachable cell, ``kind/mode``, in report order.
POWER_CELLS: tuple[str, ...] = tuple(
    f"{kind}/{mode}" for kind in POWER_CELL_KINDS for mode in FAULT_MODES
    if mode != "sync-error" or kind in SYNC_KINDS
)


def cell_name(kind: str, mode: str) -> str:
    """The cell of a case: ``kind/mode``."""
    return f"{kind}/{mode}"


def point_kind(point: PointRecord, previous: PointRecord | None = None) -> str:
    """What the store does at ``point`` (inside an operation), by its call and path;
    ``previous``: the point before it (a directory sync follows what it makes durable)."""
    call, path = point.call, point.path
    parts = path.split("/")
    if "commitlog" in parts[:-1]:
        return {"write": "segment-append", "sync": "segment-sync", "remove": "reclaim-delete",
                "create": "segment-roll", "truncate": "segment-roll"}.get(call, OTHER_KIND)
    if "consumequeue" in parts[:-1] or parts[-1] == "consumequeue":
        if call in ("remove", "remove_dir"):
            return "reclaim-delete"
        return "cq-write" if call in ("write", "sync") else "cq-file"
    if call == "sync_dir":
        return _dir_sync_kind(path, previous)
    name = posixpath.basename(path)
    if name.startswith("checkpoint"):
        return "checkpoint-rename" if call == "rename" else "checkpoint-write"
    if name.startswith(("abort", "lock", "rmqsim-commitlog")):
        return "markers"
    return OTHER_KIND


def _dir_sync_kind(path: str, previous: PointRecord | None) -> str:
    """A directory's sync: the commit log's is a segment's entry; the store directory's
    belongs to the rename or marker before it."""
    if posixpath.basename(path) == "commitlog":
        return "segment-dir-entry"
    if path.endswith("/consumequeue") or "/consumequeue/" in path:
        return "cq-file"
    # Another directory (the store's): after the checkpoint's rename, its entry; else
    # the abort marker's (created, removed) or the format file's.
    if previous is not None and point_kind(previous) == "checkpoint-rename":
        return "checkpoint-rename"
    return "markers"


def point_kinds(points: Sequence[tuple[int, PointRecord]]) -> list[str]:
    """The kind of each ``(step, point)`` of a run, in order (step 0: the first open)."""
    kinds: list[str] = []
    previous: PointRecord | None = None
    for step, point in points:
        kinds.append(FIRST_OPEN_KIND if step == 0 else point_kind(point, previous))
        previous = point
    return kinds


def _why_empty(kind: str, seen_kinds: set[str], chosen: bool) -> str:
    """Why no sweep cut a cell of ``kind``."""
    if kind in seen_kinds:
        return "points of this kind were swept, never in this mode"
    if not chosen:
        return ("no sweep reached such a point on the backend's own file sizes (rmqsim "
                "chooses them only for a factory that takes geometry=): no segment rolled")
    return "no swept scenario made such a call"


def power_cells_summary(sweeps: Iterable[Any]) -> dict[str, Any]:
    """``summary.json``'s ``power_coverage``: the cells the power-loss sweeps of a queue's
    storage backend (``PowerSweepResult``s, with their ``cells`` and ``kinds``) cut, how
    many, and every cell never cut, with why."""
    done = list(sweeps)
    merged: Counter[str] = Counter()
    seen: set[str] = set()
    for sweep in done:
        merged.update(sweep.cells)
        seen.update(sweep.kinds)
    chosen = any(sweep.geometry is not None for sweep in done)
    never = {cell: _why_empty(cell.partition("/")[0], seen, chosen)
             for cell in POWER_CELLS if not merged[cell]}
    return {
        "sweeps": len(done),
        "geometry": next((s.geometry for s in done if s.geometry is not None), None),
        "cells": {"reachable": len(POWER_CELLS), "cut": len(POWER_CELLS) - len(never)},
        "never_cut": never,
        "counts": {cell: merged[cell] for cell in POWER_CELLS},
    }


def power_cells_lines(summary: Mapping[str, Any]) -> list[str]:
    """The printed summary's lines about the power-loss cells (``power_cells_summary``)."""
    cells = summary["cells"]
    geometry = summary["geometry"]
    sizes = ("the backend's own file sizes" if geometry is None else
             f"{geometry['segment_size_bytes']}-byte segments, "
             f"{geometry['cq_entries_per_file']} consume-queue entries a file")
    lines = [f"power-loss cells ({summary['sweeps']} sweeps, {sizes}): {cells['cut']} of "
             f"{cells['reachable']} (call kind x fault mode) cells cut"]
    by_why: dict[str, list[str]] = {}
    for cell, why in summary["never_cut"].items():
        by_why.setdefault(why, []).append(cell)
    for why, names in by_why.items():
        lines.append(f"power-loss cells never cut ({why}): {', '.join(names)}")
    return lines
