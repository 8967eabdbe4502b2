"""The driver of the real Apache RocketMQ message store (impl/external/rocketmq_store/,
built by scripts/build-rocketmq.sh), driven directly over its standard input and output
with the store layer's JSON lines: no rmqsim code in between, only subprocess, json and
base64. Skipped, with the reason, where the driver is not built, unless
RMQSIM_REQUIRE_ROCKETMQ=1.

Each test starts one or two JVMs (≈0.5-2 s each on a loaded 2-core machine); the file
takes ≈20-40 s."""

from __future__ import annotations

import base64
import getpass
import json
import os
import re
import select
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
DRIVER = ROOT / "impl" / "external" / "rocketmq_store"
SERVER = DRIVER / "rocketmq-store-server"
BUILT = (DRIVER / "target" / "rmqsim-rocketmq-store.jar", DRIVER / "target" / "classpath.txt")
#: How long one reply may take (a JVM start and a store's open included), on a loaded machine.
REPLY_TIMEOUT_S = 60.0
SYNC = {"flush": "sync", "segment_bytes": 64 * 1024, "max_body_bytes": 4096}
ASYNC = {**SYNC, "flush": "async"}


def _require_built() -> None:
    missing = [str(p.relative_to(ROOT)) for p in BUILT if not p.is_file()]
    if missing:
        reason = (
            f"the RocketMQ driver is not built ({', '.join(missing)}): scripts/build-rocketmq.sh"
        )
        if os.environ.get("RMQSIM_REQUIRE_ROCKETMQ") == "1":
            pytest.fail(reason)
        pytest.skip(reason)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def body(i: int, size: int = 16) -> bytes:
    """A body that names its put: b'<i>:' padded with '.' to size."""
    return f"{i}:".encode().ljust(size, b".")


class Driver:
    """One server process, in a process group of its own, as rmqsim starts it."""

    def __init__(self, tmp_path: Path, *options: str) -> None:
        self.stderr_path = tmp_path / f"stderr-{time.monotonic_ns()}.txt"
        self.proc = subprocess.Popen(
            [str(SERVER), *options], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self.stderr_path.open("wb"), start_new_session=True,
        )  # fmt: skip
        self.next_id = 0
        self.buffer = b""
        self.points: list[str] = []

    def send(self, line: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line)
        self.proc.stdin.flush()

    def line(self) -> dict[str, Any] | None:
        """The next line from the server, or None at the end of its output."""
        assert self.proc.stdout is not None
        deadline = time.monotonic() + REPLY_TIMEOUT_S
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.proc.stdout], [], [], max(left, 0))
            assert ready, f"no reply within {REPLY_TIMEOUT_S} s; stderr: {self.stderr()}"
            chunk = os.read(self.proc.stdout.fileno(), 65536)
            if not chunk:
                return None
            self.buffer += chunk
        raw, self.buffer = self.buffer.split(b"\n", 1)
        assert raw.isascii(), raw
        value = json.loads(raw)
        assert isinstance(value, dict), raw
        return value

    def call(self, op: str, now: int = 0, wait: bool = False, **args: Any) -> dict[str, Any]:
        """One request; its fault points are collected (and go_on sent when waiting)."""
        self.next_id += 1
        request = {"id": self.next_id, "op": op, "now": now, "wait_at_points": wait, **args}
        self.send(json.dumps(request).encode() + b"\n")
        while True:
            reply = self.line()
            assert reply is not None, f"the server ended; stderr: {self.stderr()}"
            assert reply["id"] == self.next_id, reply
            if "point" not in reply:
                assert set(reply) in ({"id", "ok"}, {"id", "error"}), reply
                return reply
            self.points.append(reply["point"])
            if wait:
                self.send(json.dumps({"go_on": self.next_id}).encode() + b"\n")

    def ok(self, op: str, now: int = 0, **args: Any) -> Any:
        reply = self.call(op, now, **args)
        assert "ok" in reply, reply
        return reply["ok"]

    def error(self, op: str, **args: Any) -> dict[str, Any]:
        reply = self.call(op, **args)
        assert "error" in reply, reply
        error: dict[str, Any] = reply["error"]
        return error

    def put(self, topic: str, queue: int, bodies: list[bytes], now: int = 0) -> int:
        offset: int = self.ok("put", now, topic=topic, queue=queue, bodies=[b64(x) for x in bodies])
        return offset

    def get(self, topic: str, queue: int, offset: int, max_count: int) -> list[bytes]:
        got = self.ok("get", topic=topic, queue=queue, offset=offset, max_count=max_count)
        return [base64.b64decode(x) for x in got]

    def offsets(self, topic: str, queue: int) -> tuple[int, int]:
        low, high = self.ok("offsets", topic=topic, queue=queue)
        return low, high

    def get_all(self, topic: str, queue: int) -> list[bytes]:
        """Every retained body, from min to max, however many each get returns."""
        low, high = self.offsets(topic, queue)
        bodies: list[bytes] = []
        while low + len(bodies) < high:
            got = self.get(topic, queue, low + len(bodies), high)
            assert got, (topic, queue, low + len(bodies))
            bodies += got
        return bodies

    def close(self) -> None:
        assert self.ok("close") is None
        assert self.proc.wait(timeout=REPLY_TIMEOUT_S) == 0, self.stderr()

    def kill(self) -> None:
        """A crash: SIGKILL of the whole process group."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=REPLY_TIMEOUT_S)

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")[-3000:]


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Any]:
    """start(*options) -> a Driver that has answered hello; every group is killed at the end."""
    _require_built()
    started: list[Driver] = []

    def _start(*options: str) -> Driver:
        driver = Driver(tmp_path, *options)
        started.append(driver)
        hello = driver.ok("hello", protocol=1, layer="store")
        assert hello["layer"] == "store" and hello["protocol"] == 1, hello
        return driver

    yield _start
    for driver in started:
        if driver.proc.poll() is None:
            os.killpg(driver.proc.pid, signal.SIGKILL)
            driver.proc.wait()


def opened(start: Any, path: Path, config: dict[str, Any], *options: str) -> Driver:
    driver: Driver = start(*options)
    assert driver.ok("open", path=str(path), config=config) is None
    return driver


def dirty_commitlog_kib(pid: int) -> int:
    """Dirty (written, not yet written back) kB of the commit-log files mapped by ``pid``:
    after an msync they are clean. The kernel writes dirty pages back by itself only after
    ≈30 s (vm.dirty_expire_centisecs), far longer than these tests wait."""
    total, mapping = 0, ""
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
            mapping = line.split()[-1] if len(line.split()) >= 6 else ""
        elif "/commitlog/" in mapping and line.startswith(("Shared_Dirty:", "Private_Dirty:")):
            total += int(line.split()[1])
    return total


# -- hello, and no store yet


def test_hello_answers_and_nothing_is_served_before_open(start: Any) -> None:
    driver = start()
    hello = driver.ok("hello", protocol=1, layer="store")
    assert hello["implementation"].startswith("rocketmq-store 5.")
    assert hello["flush_modes"] == ["sync", "async"]
    assert hello["batch_atomic"] is False
    assert driver.error("put", topic="t", queue=0, bodies=[b64(b"x")])["kind"] == "NotServing"
    assert driver.error("offsets", topic="t", queue=0)["kind"] == "NotServing"
    assert driver.error("close")["kind"] == "NotServing"  # and the server goes on serving
    assert driver.ok("hello")["layer"] == "store"
    driver.proc.stdin.close()  # end of input: the server exits 0
    assert driver.proc.wait(timeout=REPLY_TIMEOUT_S) == 0


def test_an_unknown_bug_is_refused_with_one_line_naming_the_known_ones() -> None:
    _require_built()
    done = subprocess.run([str(SERVER), "--bug", "nope"], capture_output=True, text=True,
                          timeout=REPLY_TIMEOUT_S, stdin=subprocess.DEVNULL)  # fmt: skip
    assert done.returncode == 2
    assert done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1
    for name in ("cq-drop", "flush-lies", "retain-forcibly"):
        assert name in done.stderr


def test_a_malformed_line_gets_an_error_or_an_exit_never_a_hang(start: Any) -> None:
    driver = start()
    driver.send(b"this is not json\n")
    reply = driver.line()
    if reply is not None:
        assert reply["error"]["kind"] == "InvalidArgument", reply
    assert driver.proc.wait(timeout=REPLY_TIMEOUT_S) != 0


# -- the operations, sync flush


def test_puts_gets_offsets_flush_and_a_clean_reopen(start: Any, tmp_path: Path) -> None:
    path = tmp_path / "store"  # does not exist yet: open creates it
    driver = opened(start, path, SYNC)
    assert driver.offsets("t", 0) == (0, 0)
    assert [driver.put("t", 0, [body(i)], now=10) for i in range(3)] == [0, 1, 2]
    assert driver.put("t", 0, [body(3), body(4), b""], now=11) == 3  # a batch, an empty body
    assert driver.put("t", 1, [body(100)]) == 0
    assert driver.offsets("t", 0) == (0, 6)
    assert driver.get("t", 0, 0, 2) == [body(0), body(1)]
    assert driver.get("t", 0, 2, 100) == [body(2), body(3), body(4), b""]
    assert driver.get("t", 0, 6, 1) == []  # at max
    assert driver.get("t", 0, 99, 1) == []  # beyond max
    assert driver.get("never", 7, 0, 1) == [] and driver.offsets("never", 7) == (0, 0)
    assert dirty_commitlog_kib(driver.proc.pid) == 0  # sync: flushed when the put returned
    assert driver.ok("flush") is None
    assert driver.error("open", path=str(path), config=SYNC)["kind"] == "InvalidArgument"
    driver.close()
    again = opened(start, path, SYNC)
    assert again.get_all("t", 0) == [body(0), body(1), body(2), body(3), body(4), b""]
    assert again.get_all("t", 1) == [body(100)]
    assert again.put("t", 0, [body(6)]) == 6
    again.close()


def test_bad_arguments_are_invalid_argument_in_the_contracts_order(
    start: Any, tmp_path: Path
) -> None:
    driver = opened(start, tmp_path / "store", {**SYNC, "max_body_bytes": 8})
    good = [b64(b"12345678")]
    bad: dict[str, tuple[str, dict[str, Any]]] = {
        "empty bodies": ("put", {"topic": "t", "queue": 0, "bodies": []}),
        "body too big": ("put", {"topic": "t", "queue": 0, "bodies": [b64(b"123456789")]}),
        "queue < 0": ("put", {"topic": "t", "queue": -1, "bodies": good}),
        "empty topic": ("put", {"topic": "", "queue": 0, "bodies": good}),
        "topic 128": ("put", {"topic": "a" * 128, "queue": 0, "bodies": good}),
        "topic char": ("put", {"topic": "a/b", "queue": 0, "bodies": good}),
        "not base64": ("put", {"topic": "t", "queue": 0, "bodies": ["!!"]}),
        "offset < 0": ("get", {"topic": "t", "queue": 0, "offset": -1, "max_count": 1}),
        "max_count 0": ("get", {"topic": "t", "queue": 0, "offset": 0, "max_count": 0}),
        "topic before bodies": ("put", {"topic": "a b", "queue": 0, "bodies": []}),
        "offsets queue": ("offsets", {"topic": "t", "queue": "0"}),
    }
    for name, (op, args) in bad.items():
        error = driver.error(op, **args)
        assert error["kind"] == "InvalidArgument", (name, error)
    assert "topic" in driver.error("put", topic="a b", queue=0, bodies=[])["message"]
    assert driver.put("t", 0, [b"12345678"]) == 0  # nothing bad was written
    assert driver.put("a" * 127, 0, [b"x"]) == 0
    assert driver.error("frobnicate")["kind"] == "InvalidArgument"
    driver.close()


def test_fault_points_wait_for_go_on(start: Any, tmp_path: Path) -> None:
    driver = opened(start, tmp_path / "store", SYNC)
    reply = driver.call("put", wait=True, topic="t", queue=0, bodies=[b64(b"x")])
    assert reply == {"id": driver.next_id, "ok": 0}
    assert driver.points == ["put.before_append", "put.after_append"]
    driver.close()


def test_every_acknowledged_put_survives_kill_9_under_sync_flush(
    start: Any, tmp_path: Path
) -> None:
    path = tmp_path / "store"
    driver = opened(start, path, SYNC)
    for i in range(0, 60, 3):
        driver.put("k", i % 2, [body(i, 1000)])
        driver.put("k", i % 2, [body(i + 1, 1000), body(i + 2, 1000)])
    driver.kill()
    again = opened(start, path, SYNC)
    expected = {q: [body(i + j, 1000) for i in range(0, 60, 3) if i % 2 == q for j in range(3)]
                for q in (0, 1)}  # fmt: skip
    assert again.get_all("k", 0) == expected[0]
    assert again.get_all("k", 1) == expected[1]
    again.close()


def test_nothing_is_left_outside_the_store_directory(
    start: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing the driver or RocketMQ writes stays outside the store's directory, and
    nothing but the store's own files is in it: RocketMQ's RocksDB info log (it went to
    ~/logs/rocketmqlogs/, one file per store path and more per reopen, never removed) lives
    in a scratch home under the JVM's temporary directory that the open removes once the
    store has started, and the next JVM's open removes one a killed JVM left; no JVM
    performance-data file in /tmp/hsperfdata_USER/ (a killed JVM leaves it)."""
    home, java_tmp = tmp_path / "home", tmp_path / "java-tmp"
    home.mkdir()
    java_tmp.mkdir()
    monkeypatch.setenv("RMQSIM_JAVA_OPTS", f"-Duser.home={home} -Djava.io.tmpdir={java_tmp}")
    path = tmp_path / "store"
    driver = opened(start, path, SYNC)
    driver.put("t", 0, [body(0)])
    perf_data = Path("/tmp") / f"hsperfdata_{getpass.getuser()}"  # HotSpot's, not TMPDIR
    assert not (perf_data / str(driver.proc.pid)).exists()
    assert sorted(java_tmp.rglob("*")) == []  # the open removed its scratch home
    stale = java_tmp / "rmqsim-rocketmq-home-999999999" / "logs"  # as if a JVM was killed
    stale.mkdir(parents=True)  # in its open, before it removed its own
    driver.kill()
    again = opened(start, path, SYNC)
    assert again.get_all("t", 0) == [body(0)]
    again.close()
    assert sorted(home.rglob("*")) == [] and sorted(java_tmp.rglob("*")) == []
    assert not (path / "logs").exists()  # the store's directory holds the store's files


# -- retention (async flush, 64 KiB segments)


def _fill(driver: Driver, count: int) -> list[tuple[int, int, bytes]]:
    """count puts of 1 KiB at now = 100 + i, alternating queues 0 and 1 (queue 2 gets the
    first 10 only): 60 of them fill a 64 KiB commit-log file."""
    puts = []
    for i in range(count):
        queue = 2 if i < 10 and i % 5 == 4 else i % 2
        driver.put("r", queue, [body(i, 1024)], now=100 + i)
        puts.append((100 + i, queue, body(i, 1024)))
    return puts


def _retained_ok(driver: Driver, puts: list[tuple[int, int, bytes]], cutoff: int) -> None:
    """Each queue keeps a suffix of its puts that holds every put made at or after cutoff."""
    for queue in (0, 1, 2):
        mine = [b for now, q, b in puts if q == queue]
        kept = driver.get_all("r", queue)
        low, high = driver.offsets("r", queue)
        assert high == len(mine) and kept == mine[low:], queue
        assert all(b in kept for now, q, b in puts if q == queue and now >= cutoff), queue
        assert driver.get("r", queue, max(low - 1, 0), 5)[:1] in ([], [mine[0]]), queue


def test_retention_deletes_old_files_and_moves_min_offsets(start: Any, tmp_path: Path) -> None:
    path = tmp_path / "store"
    driver = opened(start, path, ASYNC)
    puts = _fill(driver, 240)
    driver.ok("retain", now=1000, cutoff=100)  # nothing is older: nothing goes
    assert [driver.offsets("r", q)[0] for q in (0, 1, 2)] == [0, 0, 0]
    driver.ok("retain", now=1000, cutoff=190)  # the first file (puts 0-58) is all older
    lows = [driver.offsets("r", q)[0] for q in (0, 1, 2)]
    assert lows[0] > 0 and lows[1] > 0 and lows[2] == 2, lows  # queue 2: emptied, min == max
    assert driver.get("r", 0, 0, 5) == []  # below min
    _retained_ok(driver, puts, 190)
    driver.ok("retain", now=1000, cutoff=10**9)  # all but the file being written
    _retained_ok(driver, puts, 10**9)
    lows = [driver.offsets("r", q)[0] for q in (0, 1)]
    assert 100 < lows[0] < 120 and 100 < lows[1] < 120, lows
    driver.ok("flush")
    driver.close()
    again = opened(start, path, ASYNC)
    assert [again.offsets("r", q)[0] for q in (0, 1)] == lows
    assert again.offsets("r", 2) == (2, 2)
    again.close()


# -- the seeded bugs: each makes the contract observably false


def test_bug_cq_drop_loses_every_fifth_consume_queue_entry(start: Any, tmp_path: Path) -> None:
    driver = opened(start, tmp_path / "store", SYNC, "--bug", "cq-drop")
    assert "cq-drop" in driver.ok("hello")["implementation"]
    assert [driver.put("t", 0, [body(i)]) for i in range(10)] == list(range(10))
    assert driver.offsets("t", 0) == (0, 8)  # two entries never written
    assert driver.get("t", 0, 4, 1) == [body(5)]  # offset 4 answers the 6th put's body
    driver.close()


def test_bug_flush_lies_leaves_sync_puts_and_flushes_unflushed(start: Any, tmp_path: Path) -> None:
    driver = opened(start, tmp_path / "store", SYNC, "--bug", "flush-lies")
    for i in range(20):
        driver.put("t", 0, [body(i, 1000)])
    assert dirty_commitlog_kib(driver.proc.pid) > 0  # acknowledged under "sync", not on disk
    driver.ok("flush")
    assert dirty_commitlog_kib(driver.proc.pid) > 0  # and flush did nothing
    driver.close()


def test_bug_retain_forcibly_deletes_messages_put_after_the_cutoff(
    start: Any, tmp_path: Path
) -> None:
    driver = opened(start, tmp_path / "store", ASYNC, "--bug", "retain-forcibly")
    puts = _fill(driver, 130)
    driver.ok("retain", now=1000, cutoff=0)  # every put is at or after 0: nothing may go
    lows = [driver.offsets("r", q)[0] for q in (0, 1)]
    assert lows[0] > 0 and lows[1] > 0, lows
    assert len(driver.get_all("r", 0)) < len([p for p in puts if p[1] == 0])
    driver.close()


# -- measurements (README.md "Measured"): python tests/test_rocketmq_driver.py


def _timed(action: Any) -> float:
    began = time.monotonic()
    action()
    return time.monotonic() - began


def _rss_mib(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+)", status).group(1)) / 1024  # type: ignore[union-attr]


def _measure_start_open(tmp: Path, runs: int = 5) -> dict[str, float]:
    hello, open_s, close_s = [], [], []
    for run in range(runs):
        driver = Driver(tmp)
        hello.append(_timed(lambda d=driver: d.ok("hello")))
        open_s.append(_timed(lambda d=driver, r=run: d.ok("open", path=str(tmp / f"new{r}"),
                                                           config=SYNC)))  # fmt: skip
        close_s.append(_timed(driver.close))
    rss = 0.0
    slow = Driver(tmp, "--shutdown-sleep")
    slow.ok("open", path=str(tmp / "slow"), config=SYNC)
    rss = _rss_mib(slow.proc.pid)
    slow_close = _timed(slow.close)
    median = lambda xs: sorted(xs)[len(xs) // 2]  # noqa: E731
    return {"start to hello s": median(hello), "open new s": median(open_s),
            "close s": median(close_s), "close --shutdown-sleep s": slow_close,
            "RSS after open MiB": rss}  # fmt: skip


def _measure_rates(tmp: Path, count: int = 1000) -> dict[str, float]:
    rates: dict[str, float] = {}
    kib = body(0, 1024)
    for name, config in (("sync", SYNC), ("async", ASYNC)):
        driver = Driver(tmp)
        driver.ok("open", path=str(tmp / f"rate-{name}"), config=config)
        for _ in range(200):  # warm-up
            driver.put("w", 0, [kib])
        took = _timed(lambda d=driver: [d.put("t", 0, [kib]) for _ in range(count)])
        rates[f"put 1 KiB/s {name}"] = count / took
        took = _timed(lambda d=driver: [d.put("b", 0, [kib] * 10) for _ in range(count // 10)])
        rates[f"put 10x1 KiB batches/s {name}"] = count / 10 / took
        if name == "sync":
            took = _timed(lambda d=driver: [d.get("t", 0, i, 1) for i in range(count)])
            rates["get (max_count 1)/s"] = count / took
        driver.close()
    return rates


def _measure_reopen(tmp: Path, messages: int = 20_000) -> dict[str, float]:
    path = tmp / "big"
    driver = Driver(tmp)
    driver.ok("open", path=str(path), config=ASYNC)
    for i in range(0, messages, 50):
        driver.put("t", i // 50 % 4, [body(i, 1024)] * 50)
    driver.ok("flush")
    driver.close()
    size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20
    result = {"store MiB": size}
    for name in ("after close", "after kill -9"):
        driver = Driver(tmp)
        driver.ok("hello")
        result[f"reopen {name} s"] = _timed(lambda d=driver: d.ok("open", path=str(path),
                                                                  config=ASYNC))  # fmt: skip
        assert driver.offsets("t", 0) == (0, messages // 4)
        driver.kill()
    return result


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        print(f"load average before: {os.getloadavg()[0]:.1f}")
        for part in (_measure_start_open, _measure_rates, _measure_reopen):
            for key, value in part(Path(scratch)).items():
                print(f"{key}: {value:.3f}")
        print(f"load average after: {os.getloadavg()[0]:.1f}")
