"""The waiting lane's scheduler (tests/lanes.py), driven as pytest-xdist's controller
drives it, with stand-in workers: which worker gets which file, and that no file is ever
left unrun (the lane takes any file once it is the only worker left)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import Any

import pytest

from tests.lanes import SHARED_SPARK, WAITING, LaneScheduling, lane_id

WAITS = sorted(WAITING)[0]


@dataclass(eq=False)
class _Gateway:
    id: str


@dataclass(eq=False)
class _Worker:
    """A stand-in for xdist's WorkerController: it runs what it is sent when told to."""

    gateway: _Gateway
    sent: list[int] = field(default_factory=list)
    shutting_down: bool = False

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent.extend(indices)

    def shutdown(self) -> None:
        self.shutting_down = True


class _Config:
    """What the scheduler reads of pytest's config: ``-n`` and ``--no-loadscope-reorder``."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.option = type("Option", (), {"loadscopereorder": False})()

    def getvalue(self, name: str) -> Any:
        assert name == "tx"
        return [f"{self.workers}*popen"]


def _collection(*files: tuple[str, int]) -> list[str]:
    return [f"{name}::test_{i}" for name, count in files for i in range(count)]


def _start(workers: int, collection: list[str],
           lane_first: bool = False) -> tuple[LaneScheduling, list[_Worker]]:
    """A scheduler whose workers are ready (the lane first, or last) and have collected."""
    scheduler = LaneScheduling(_Config(workers))
    nodes = [_Worker(_Gateway(f"gw{i}")) for i in range(workers)]
    if lane_first:
        nodes.reverse()
    for node in nodes:
        scheduler.add_node(node)
    for node in nodes:
        scheduler.add_node_collection(node, collection)
    scheduler.schedule()
    return scheduler, nodes


def _finish(scheduler: LaneScheduling, nodes: list[_Worker]) -> dict[str, list[str]]:
    """Each worker runs what it was sent, one test at a time, in turn, until none has any
    left: worker id -> the files of the tests it ran, in order."""
    ran: dict[str, list[str]] = {node.gateway.id: [] for node in nodes}
    done: dict[str, int] = dict.fromkeys(ran, 0)
    while True:
        busy = [node for node in nodes if done[node.gateway.id] < len(node.sent)]
        if not busy:
            return ran
        for node in busy:
            index = node.sent[done[node.gateway.id]]
            done[node.gateway.id] += 1
            assert scheduler.collection is not None
            ran[node.gateway.id].append(scheduler.collection[index].split("::")[0])
            scheduler.mark_test_complete(node, index)


def test_the_lane_runs_the_waiting_files_and_the_others_the_rest() -> None:
    collection = _collection(("tests/test_big.py", 30), (WAITS, 4), ("tests/test_a.py", 3),
                             ("tests/test_b.py", 3), ("tests/test_c.py", 3))  # fmt: skip
    scheduler, nodes = _start(3, collection)
    ran = _finish(scheduler, nodes)
    assert set(ran[lane_id(3)]) == {WAITS}
    assert WAITS not in ran["gw0"] + ran["gw1"]
    assert sorted(chain.from_iterable(ran.values())) == sorted(
        name.split("::")[0] for name in collection)
    assert scheduler.tests_finished and not scheduler.workqueue


def test_the_computing_workers_take_a_waiting_file_once_nothing_else_is_left() -> None:
    other = sorted(WAITING)[1]
    scheduler, nodes = _start(3, _collection((WAITS, 20), (other, 2), ("tests/test_a.py", 1)))
    ran = _finish(scheduler, nodes)
    computing = ran["gw0"] + ran["gw1"]
    assert len(set(ran[lane_id(3)])) == 1 and set(ran[lane_id(3)]) < WAITING
    assert "tests/test_a.py" in computing and WAITING & set(computing)
    assert scheduler.tests_finished


@pytest.mark.parametrize("files", [[("tests/test_a.py", 2)], [("tests/test_a.py", 2),
                                                              ("tests/test_b.py", 1)]])
def test_no_file_is_left_unrun_when_the_lane_is_the_last_worker(
    files: list[tuple[str, int]],
) -> None:
    """Fewer files than workers: xdist ends the workers it cannot use (the last ready
    first), which may leave the lane alone with computing files; it runs them (else the
    run ended with none of them run)."""
    collection = _collection(*files)
    scheduler, nodes = _start(3, collection, lane_first=True)
    ran = _finish(scheduler, nodes)
    assert sorted(chain.from_iterable(ran.values())) == sorted(
        name.split("::")[0] for name in collection)
    assert scheduler.tests_finished and not scheduler.workqueue


def test_the_lane_ends_once_no_waiting_file_is_left() -> None:
    _, nodes = _start(3, _collection(("tests/test_a.py", 5), ("tests/test_b.py", 5)))
    lane = next(node for node in nodes if node.gateway.id == lane_id(3))
    assert lane.shutting_down and not lane.sent


def test_the_files_of_the_shared_spark_session_run_on_one_worker() -> None:
    """Each worker that runs a file using ``shared_spark`` starts a session: those files
    are one unit, run whole by one worker, between the other files."""
    spark = sorted(SHARED_SPARK)
    # Apart in the collection, with other files between: as files, they went to both
    # computing workers.
    collection = _collection((spark[0], 2), ("tests/test_a.py", 6), ("tests/test_b.py", 6),
                             (spark[1], 2), ("tests/test_c.py", 6), (spark[2], 2),
                             ("tests/test_d.py", 6))  # fmt: skip
    scheduler, nodes = _start(3, collection)
    ran = _finish(scheduler, nodes)
    assert [worker for worker, files in ran.items() if set(spark) & set(files)] in (
        ["gw0"], ["gw1"])
    assert sorted(chain.from_iterable(ran.values())) == sorted(
        name.split("::")[0] for name in collection)


def test_every_file_using_the_shared_spark_session_is_in_its_unit() -> None:
    tests = Path(__file__).resolve().parent
    asks = re.compile(r"^\s*(def \w+\()?shared_spark: ", re.MULTILINE)  # a parameter
    using = {f"tests/{path.relative_to(tests).as_posix()}" for path in tests.rglob("test_*.py")
             if asks.search(path.read_text(encoding="utf-8"))}  # fmt: skip
    assert using == SHARED_SPARK
