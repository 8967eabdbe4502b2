"""The waiting lane: ``scripts/test.sh`` runs pytest-xdist with one worker more than the
cores it computes on, and that worker runs the test files that mostly wait (``WAITING``):
a bound that must pass, a process stopped by Ctrl-Z, a child's last resort. Beside the
computing workers they cost the machine little, where on a computing worker they held a
core idle for minutes.

``LaneScheduling`` is pytest-xdist's ``loadscope`` (a file is a unit of work, handed out in
collection order to a worker nearly out of work) with one rule more: the lane worker (the
last, ``gw{N-1}``) takes only waiting files and ends once none is left; the other workers
take the rest, and a waiting file too once nothing else is left. The computing workers run
at a lower priority (``COMPUTING_NICE``), so that what a waiting test computes (the run up
to a hang, a child's start) is not slowed by them: their bounds hold as on an idle core.

Which files wait was measured (wall seconds against the CPU seconds of the test process
and the children it reaped, each file alone on a quiet machine, 2026-11-28): liveness 65
against 9, the watchdog's stop 29 against 3, its grace 9 against 2, the process mode 8
against 3. A file that computes (a Spark JVM, a gate's workers) does not belong here.

One rule more for the Spark files: the test files that use the test process's one Spark
session (``SHARED_SPARK``: tests/spark_fixtures.py's ``shared_spark``) are one unit of work
together, so one worker starts that session (a driver JVM and its Python workers, ≈ 15 CPU
seconds), where each worker that ran one of them used to start its own.
"""

from __future__ import annotations

from typing import Any

from xdist.scheduler import LoadScopeScheduling

__all__ = [
    "COMPUTING_NICE",
    "SHARED_SPARK",
    "SHARED_SPARK_SCOPE",
    "WAITING",
    "LaneScheduling",
    "is_lane",
    "lane_id",
]

#: The test files that mostly wait (see above), run on the lane.
WAITING = frozenset({
    "tests/test_liveness.py",
    "tests/test_watchdog_stop.py",
    "tests/test_watchdog_grace.py",
    "tests/test_process_mode.py",
})
#: The test files that use ``shared_spark`` (tests/spark_fixtures.py), run as one unit.
SHARED_SPARK = frozenset({
    "tests/test_reports_spark.py",
    "tests/test_reports_stream.py",
    "tests/test_reports_partials.py",
})
#: The name of their unit of work.
SHARED_SPARK_SCOPE = "tests/spark_fixtures.py::shared_spark"
#: How much lower the computing workers' priority is (``os.nice``), inherited by the
#: processes they start.
COMPUTING_NICE = 5


def lane_id(workers: int) -> str:
    """The lane's worker id among ``workers`` pytest-xdist workers: the last."""
    return f"gw{workers - 1}"


def is_lane(node: Any, workers: int) -> bool:
    return str(node.gateway.id) == lane_id(workers)


def _waits(scope: str) -> bool:
    return scope.split("::", 1)[0] in WAITING


class LaneScheduling(LoadScopeScheduling):  # type: ignore[misc]
    """``loadscope`` with a waiting lane, the Spark session's files one unit (module
    docstring)."""

    def _split_scope(self, nodeid: str) -> str:
        scope = str(super()._split_scope(nodeid))
        return SHARED_SPARK_SCOPE if scope.split("::", 1)[0] in SHARED_SPARK else scope

    def _next_scope(self, node: Any) -> str | None:
        """The first unit in the queue this node takes, or None. The lane takes any unit
        once no other worker is left (fewer files than workers, a worker lost)."""
        lane = is_lane(node, self.numnodes) and any(
            other is not node and not other.shutting_down for other in self.assigned_work)
        for scope in self.workqueue:
            if _waits(scope) == lane:
                return str(scope)
        if lane:
            return None
        return next(iter(self.workqueue), None)  # only waiting files left: help the lane

    def _assign_work_unit(self, node: Any) -> None:
        scope = self._next_scope(node)
        if scope is None:  # a lane with no waiting file in the collection (``-k``)
            node.shutdown()
            return
        work_unit = self.workqueue.pop(scope)
        self.assigned_work.setdefault(node, {})[scope] = work_unit
        collection = self.registered_collections[node]
        node.send_runtest_some([collection.index(nodeid)
                                for nodeid, completed in work_unit.items() if not completed])

    def _reschedule(self, node: Any) -> None:
        if node.shutting_down:
            return
        if self._next_scope(node) is None:  # nothing left that this worker takes
            node.shutdown()
            return
        if self._pending_of(self.assigned_work[node]) > 2:
            return
        self._assign_work_unit(node)
