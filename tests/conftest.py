"""Shared fixtures: a fake clock and a queue factory parametrized over the implementations.

Every contract test takes ``mq_factory`` (and usually ``clock``) and so runs once against the
reference model (id ``model``) and once against the RocksDB implementation (id ``impl``). A
backend that cannot be imported yet is skipped with a reason, never silently dropped.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rmqsim.model.api import MessageQueue, MQConfig

pytest_plugins = ["tests.spark_fixtures"]  # one Spark session per test process

try:  # the reference model: model.ReferenceMQ(config=..., clock=...)
    from rmqsim.model import ReferenceMQ  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - only while the model is being written
    ReferenceMQ = None

try:  # the real implementation: impl.RocksMQ.open(path, config=..., clock=..., faults=None)
    from rmqsim.impl import RocksMQ  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - only while the implementation is being written
    RocksMQ = None

try:  # the commit-log backend: impl.commitlog.CommitLogMQ.open(path, ..., policy=...)
    from rmqsim.impl.commitlog import CommitLogMQ, FlushPolicy
except ImportError:  # pragma: no cover - only while the backend is being written
    CommitLogMQ = None

# Spark starts in tests do without the driver JVM's class archive (reports.jvm_archive):
# no build of it (≈ 12 s) in whichever test first starts Spark, nothing written to the
# user's cache. tests/test_reports_jvm_archive.py turns it on, in a directory of its own.
os.environ.setdefault("RMQSIM_JVM_ARCHIVE", "off")

#: Backends with a store on disk, and how each opens one.
_STORE_KINDS = ("impl", "commitlog-sync", "commitlog-async")


def _open_store(kind: str, path: Path, **kwargs: Any) -> MessageQueue:
    if kind == "impl":
        return RocksMQ.open(str(path), faults=None, **kwargs)
    mode = kind.removeprefix("commitlog-")
    return CommitLogMQ.open(str(path), faults=None, policy=FlushPolicy(mode=mode), **kwargs)

#: The start of every FakeClock: far from real time, so a stray ``time.time()`` shows.
FAKE_EPOCH = 1_000


class FakeClock:
    """A settable clock returning integer seconds; pass it as ``clock=``."""

    def __init__(self, now: int = FAKE_EPOCH) -> None:
        self.now = now
        self.calls = 0

    def __call__(self) -> int:
        self.calls += 1
        return self.now

    def set(self, now: int) -> int:
        """Move the clock to ``now`` (any direction) and return it."""
        self.now = now
        return now

    def advance(self, seconds: int = 1) -> int:
        """Move the clock forward by ``seconds`` and return the new time."""
        self.now += seconds
        return self.now

    def __repr__(self) -> str:
        return f"FakeClock(now={self.now})"


_NO_CLOCK: Any = object()  # "do not pass clock=": the implementation's default clock


class QueueFactory:
    """Makes fresh queues of one backend: ``make(config=MQConfig(), clock=...)``.

    ``kind`` is ``"model"``, ``"impl"`` or ``"commitlog-sync"``/``"commitlog-async"``.
    ``reopen(mq)`` (durability tests) closes ``mq`` (or crashes it with ``crash=True``) and
    opens the same store again; it skips the test on a
    backend without a store. Every queue made here is closed at teardown.
    """

    def __init__(self, kind: str, tmp_path: Path) -> None:
        self.kind = kind
        self._tmp_path = tmp_path
        self._counter = itertools.count()
        self._open: list[MessageQueue] = []
        self._crashed: set[int] = set()
        self._origin: dict[int, tuple[Path, MQConfig, Any]] = {}
        self._cache: dict[tuple[MQConfig | None, int], MessageQueue] = {}

    @property
    def has_store(self) -> bool:
        return self.kind in _STORE_KINDS

    def __call__(self, config: MQConfig | None = None, clock: Any = _NO_CLOCK) -> MessageQueue:
        return self.make(config, clock)

    def make(self, config: MQConfig | None = None, clock: Any = _NO_CLOCK) -> MessageQueue:
        config = MQConfig() if config is None else config
        kwargs: dict[str, Any] = {"config": config}
        if clock is not _NO_CLOCK:
            kwargs["clock"] = clock
        if self.kind == "model":
            mq = ReferenceMQ(**kwargs)
        else:
            path = self._tmp_path / f"db-{next(self._counter)}"
            mq = _open_store(self.kind, path, **kwargs)
            self._origin[id(mq)] = (path, config, clock)
        self._open.append(mq)
        return mq

    def cached(self, config: MQConfig | None = None, clock: Any = _NO_CLOCK) -> MessageQueue:
        """One queue per (config, clock) for the whole test: hypothesis examples share it
        instead of opening a store per example."""
        key = (config, id(clock))
        if key not in self._cache:
            self._cache[key] = self.make(config, clock)
        return self._cache[key]

    def reopen(self, mq: MessageQueue, *, crash: bool = False) -> MessageQueue:
        """Close (or crash) ``mq`` and open its store again with the same config and clock."""
        if not self.has_store:
            pytest.skip("durability across reopen applies to impl.RocksMQ only: the reference "
                        "model is an in-memory value with no store to reopen")
        path, config, clock = self._origin[id(mq)]
        if crash:
            if not hasattr(mq, "crash"):
                pytest.skip("rmqsim.impl.RocksMQ has no crash() yet")
            mq.crash()  # type: ignore[attr-defined]
            self._crashed.add(id(mq))
        else:
            mq.close()
        kwargs: dict[str, Any] = {"config": config}
        if clock is not _NO_CLOCK:
            kwargs["clock"] = clock
        new = _open_store(self.kind, path, **kwargs)
        self._origin[id(new)] = (path, config, clock)
        self._open.append(new)
        return new

    def close_all(self) -> None:
        errors: list[BaseException] = []
        for mq in reversed(self._open):
            if id(mq) in self._crashed:
                continue
            try:
                mq.close()
            except Exception as exc:  # close() must never fail; report it after the rest
                errors.append(exc)
        self._open.clear()
        if errors:
            raise errors[0]


BACKENDS = ("model", "impl", "commitlog-sync", "commitlog-async")


def _backend_missing(kind: str) -> str | None:
    if kind == "model" and ReferenceMQ is None:
        return "rmqsim.model.ReferenceMQ not available yet"
    if kind == "impl" and RocksMQ is None:
        return "rmqsim.impl.RocksMQ not available yet"
    if kind.startswith("commitlog") and CommitLogMQ is None:
        return "rmqsim.impl.commitlog not available yet"
    return None


@pytest.fixture(params=BACKENDS)
def mq_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[QueueFactory]:
    """A factory of fresh queues of one backend (ids ``model`` and ``impl``)."""
    reason = _backend_missing(request.param)
    if reason is not None:
        pytest.skip(reason)
    factory = QueueFactory(request.param, tmp_path)
    yield factory
    factory.close_all()


@pytest.fixture
def store_factory(mq_factory: QueueFactory) -> QueueFactory:
    """``mq_factory`` for durability tests: skips up front on a backend without a store."""
    if not mq_factory.has_store:
        pytest.skip("durability across reopen applies to impl.RocksMQ only: the reference "
                    "model is an in-memory value with no store to reopen")
    return mq_factory


@pytest.fixture
def both_factories(tmp_path: Path) -> Iterator[dict[str, QueueFactory]]:
    """One factory per backend, for tests that compare the model and the implementation."""
    for kind in BACKENDS:
        reason = _backend_missing(kind)
        if reason is not None:
            pytest.skip(reason)
    factories = {kind: QueueFactory(kind, tmp_path / kind) for kind in BACKENDS}
    yield factories
    for factory in factories.values():
        factory.close_all()


def _slowest_first() -> tuple[str, ...]:
    """The test files (or single tests) of tests/slow_tests.txt, slowest first, as a whole
    run on this machine measured them (``tests.slow_list``). They run before the rest, in
    this order, so that ``scripts/test.sh`` (pytest-xdist workers, ``--dist loadscope``:
    a file is one unit of work, handed out in this order) does not end on one of them
    while the other worker idles; its files are units, so a module-scoped fixture (a Spark
    session, an installed wheel, a shared gate) is set up once, by one worker."""
    from tests.slow_list import read_slow_entries

    return tuple(name for _, name in read_slow_entries())


SLOWEST_FIRST = _slowest_first()


def _slowness_rank(item: pytest.Item) -> int:
    """``item``'s place in ``SLOWEST_FIRST`` (its own node id first, then its file);
    ``len(SLOWEST_FIRST)`` for every other test."""
    for name in (item.nodeid, item.nodeid.split("::", 1)[0]):
        if name in SLOWEST_FIRST:
            return SLOWEST_FIRST.index(name)
    return len(SLOWEST_FIRST)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--quick", action="store_true", default=False,
        help="leave out the tests of tests/slow_tests.txt and those marked slow: a "
        "development run of about 2 minutes (./scripts/test.sh --quick); not what CI runs",
    )


#: ``1``: with ``-n N`` (N >= 2) and ``--dist loadscope``, the last worker is the waiting
#: lane (tests/lanes.py), the others compute at a lower priority (``scripts/test.sh``).
LANE_ENV = "RMQSIM_TEST_LANE"


def _lane_wanted(config: pytest.Config) -> bool:
    return os.environ.get(LANE_ENV) == "1" and config.getoption("dist", None) == "loadscope"


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """The waiting lane's scheduler (tests/lanes.py) when ``LANE_ENV`` asks for it."""
    if not _lane_wanted(config):
        return None
    from tests.lanes import LaneScheduling

    scheduler = LaneScheduling(config, log)
    return scheduler if scheduler.numnodes >= 2 else None


#: The key of a worker's ``workerinput`` that names the lane, when there is one.
_LANE_KEY = "rmqsim_lane"


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """Tell each worker which worker is the lane (its ``workerinput``)."""
    workers = int(node.workerinput["workercount"])
    if _lane_wanted(node.config) and workers >= 2:
        from tests.lanes import lane_id

        node.workerinput[_LANE_KEY] = lane_id(workers)


#: What ``scripts/test.sh`` said of the run (tests/run_time.py), taken out of the
#: environment so that neither the workers nor a pytest a test starts print its lines.
_TEST_COMMAND = pytest.StashKey[dict[str, str]]()
_PYTEST_STARTED_S = pytest.StashKey[float]()


def pytest_configure(config: pytest.Config) -> None:
    """The test command's start, for its closing lines (the controller); a computing
    worker beside the waiting lane runs at a lower priority."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None:
        from tests.run_time import CPU_ENV, STARTED_ENV, TARGET_ENV

        config.stash[_PYTEST_STARTED_S] = time.monotonic()
        names = (STARTED_ENV, CPU_ENV, TARGET_ENV)
        config.stash[_TEST_COMMAND] = {n: os.environ.pop(n) for n in names if n in os.environ}
    if workerinput is None or _LANE_KEY not in workerinput:
        return
    if workerinput["workerid"] != workerinput[_LANE_KEY]:
        from tests.lanes import COMPUTING_NICE

        os.nice(COMPUTING_NICE)


#: pytest's cache key of each test's last measured seconds (setup + call + teardown).
DURATIONS_KEY = "rmqsim/durations"
_measured_s: dict[str, float] = {}


#: pytest's cache key of each test's last measured CPU seconds: its process's and the
#: children it reaped (setup + call + teardown), to tell a test that computes from one that
#: waits (a bound, a child's start) and so shares a core well with another worker.
CPU_KEY = "rmqsim/cpu"
_measured_cpu_s: dict[str, float] = {}
_CPU_START = pytest.StashKey[float]()


def _cpu_s() -> float:
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    item.stash[_CPU_START] = _cpu_s()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    outcome = yield
    report = outcome.get_result()
    if call.when == "teardown" and _CPU_START in item.stash:
        report.user_properties.append(("cpu_s", _cpu_s() - item.stash[_CPU_START]))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Add up each test's phases (under pytest-xdist the reports reach the controller)."""
    _measured_s[report.nodeid] = _measured_s.get(report.nodeid, 0.0) + report.duration
    for name, value in report.user_properties:
        if name == "cpu_s" and isinstance(value, float):
            _measured_cpu_s[report.nodeid] = value


def pytest_unconfigure(config: pytest.Config) -> None:
    """The test command's closing lines (tests/run_time.py), after pytest's last line: its
    wall time, the machine's CPU and speed, the target's verdict."""
    command = config.stash.get(_TEST_COMMAND, {})
    if not command:  # not started by scripts/test.sh: pytest's own summary says enough
        return
    from rmqsim.conformance.bench.speed import measure_machine_speed
    from tests.run_time import closing_lines, machine_cpu_s

    pytest_wall_s = time.monotonic() - config.stash[_PYTEST_STARTED_S]
    now_cpu = machine_cpu_s()  # before the probe's own CPU second
    writer = config.get_terminal_writer()
    for line in closing_lines(command, pytest_wall_s, measure_machine_speed, now_cpu=now_cpu):
        writer.line(line)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Record this run's durations over the earlier ones (for ``--quick``)."""
    cache = getattr(session.config, "cache", None)
    if cache is None or hasattr(session.config, "workerinput") or not _measured_s:
        return
    recorded = cache.get(DURATIONS_KEY, {})
    recorded = recorded if isinstance(recorded, dict) else {}
    cache.set(DURATIONS_KEY, {**recorded, **{k: round(v, 3) for k, v in _measured_s.items()}})
    recorded_cpu = cache.get(CPU_KEY, {})
    recorded_cpu = recorded_cpu if isinstance(recorded_cpu, dict) else {}
    cache.set(CPU_KEY, {**recorded_cpu,
                        **{k: round(v, 3) for k, v in _measured_cpu_s.items()}})


def _slow_tests(config: pytest.Config) -> frozenset[str]:
    """The slow tests by this machine's recorded durations; tests/slow_tests.txt before
    the whole suite has run here."""
    from tests.slow_list import read_slow_list, slow_entries

    cache = getattr(config, "cache", None)
    recorded = cache.get(DURATIONS_KEY, None) if cache is not None else None
    if "RMQSIM_SLOW_TESTS" not in os.environ and isinstance(recorded, dict) and len(
            recorded) >= 1000:  # a whole run, not a file's
        return frozenset(node for _, node in slow_entries(recorded))
    return read_slow_list()


def _quick_selection(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``--quick``: deselect the slow tests (``tests.slow_list``)."""
    slow = _slow_tests(config)
    kept, left_out = [], []
    for item in items:
        is_slow = (item.nodeid in slow or item.nodeid.split("::", 1)[0] in slow
                   or item.get_closest_marker("slow") is not None)
        (left_out if is_slow else kept).append(item)
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = kept


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With ``--quick``, the slow tests left out. The tests of ``SLOWEST_FIRST`` first, in
    its order; the rest keep theirs (a stable sort: every worker of a run sees the same
    order, as pytest-xdist requires)."""
    if config.getoption("quick"):
        _quick_selection(config, items)
    items.sort(key=_slowness_rank)


@pytest.fixture
def clock() -> FakeClock:
    """A FakeClock at ``FAKE_EPOCH``."""
    return FakeClock()


@pytest.fixture
def mq(mq_factory: QueueFactory, clock: FakeClock) -> MessageQueue:
    """A fresh queue with the default config and the test's FakeClock."""
    return mq_factory(MQConfig(), clock)


@pytest.fixture
def wire_queues(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every ``conformance.wire.client.WireQueue`` opened during the test (a queue served
    by a protocol server in a child process), to check that none is left running."""
    from rmqsim.conformance.wire.client import WireQueue

    opened: list[Any] = []
    original = WireQueue.__init__

    def recording(self: WireQueue, *args: Any, **kwargs: Any) -> None:
        opened.append(self)
        original(self, *args, **kwargs)

    monkeypatch.setattr(WireQueue, "__init__", recording)
    return opened
