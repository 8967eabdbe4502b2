"""A sweep on a real standalone Spark cluster: a master and a worker on 127.0.0.1, started
as the README's cluster recipe starts them (pyspark's ``spark-class``), whose worker runs
with a PATH where ``python3`` has no rmqsim. A user's adapter module in a temporary
directory is the implementation; the rows must be those of the same sweep's runs made here,
without Spark (each planned task's runs, ``reports.tasks.run_chunk``: what ``local[2]``'s
tasks run, without a second Spark start).

Budget: about a minute on a quiet 2-core machine, most of it JVMs starting.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from rmqsim.reports.schema import COLUMNS, RUNS_DIR, arrow_schema
from rmqsim.reports.spark import QUICK_START_JVM_OPTIONS
from rmqsim.reports.sweep import plan_chunks
from rmqsim.reports.tasks import TaskSpec, code_version, run_chunk

pytestmark = pytest.mark.slow

#: How long the master and the worker get to start, seconds.
DAEMON_START_S = 120.0
#: The sweep the cluster runs, and its runs as the in-process reference plans them.
SEEDS, PROFILES, STEPS = range(0, 3), ("smoke", "consumer"), 30
SWEEP = ["--seeds", f"{SEEDS.start}:{SEEDS.stop}", "--profiles", ",".join(PROFILES),
         "--steps", str(STEPS)]  # fmt: skip
#: The cores of the cluster's one worker, and of ``local[2]``: the sweep's parallelism,
#: which deals its runs into tasks (and so chooses the determinism re-runs' tasks).
CORES = 2
#: ``rmqsim sweep``'s default ``--determinism-sample``.
DETERMINISM_SAMPLE = 0.02
#: The JVM options of the daemons and of the executors the worker starts (they inherit its
#: environment): ``reports.spark``'s quick start, which rmqsim's own drivers use. The JVMs
#: only schedule and carry rows here (the runs are Python tasks): the optimizing JIT's
#: compile threads would cost more CPU than they gain. The rows do not depend on them.
DAEMON_JAVA_OPTIONS = QUICK_START_JVM_OPTIONS
#: Columns that differ between two runs of the same sweep by design.
PER_SWEEP = ("sweep_id", "wall_s")

ADAPTER = '''"""A user's adapter module: rmqsim's queue behind the user's own factory."""

from rmqsim.conformance.adapter import rocksmq_factory


def factory(*, path, config, clock, faults):
    return rocksmq_factory(path=path, config=config, clock=clock, faults=faults)
'''


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def spark_class() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / "spark-class"


def bare_env() -> dict[str, str]:
    """The daemons' environment: a PATH of the system's directories only, whose
    ``python3`` has no rmqsim (checked), nothing pointing Spark or Python at ours."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYTHONPATH", "VIRTUAL_ENV")
    }
    env["PATH"] = "/usr/bin:/bin"
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    return env


def wait_for(condition: Callable[[], bool], what: str, daemons: list[subprocess.Popen]) -> None:
    deadline = time.monotonic() + DAEMON_START_S
    while not condition():
        for daemon in daemons:
            assert daemon.poll() is None, f"{what}: a Spark daemon exited ({daemon.args})"
        assert time.monotonic() < deadline, f"{what}: not within {DAEMON_START_S:.0f}s"
        time.sleep(0.5)


def accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def stop(daemons: list[subprocess.Popen]) -> None:
    """Stop the daemons by their process ids (the worker first: it ends its executors)."""
    for daemon in reversed(daemons):
        if daemon.poll() is None:
            daemon.terminate()
        try:
            daemon.wait(timeout=30)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``spark://127.0.0.1:PORT``: a standalone master and one 2-core worker."""
    if shutil.which("java") is None:
        pytest.skip("no java on PATH: Spark needs Java 17")
    env = bare_env()
    env["JAVA_TOOL_OPTIONS"] = DAEMON_JAVA_OPTIONS
    logs = tmp_path_factory.mktemp("spark-daemons")
    probe = subprocess.run(
        ["python3", "-c", "import rmqsim"], env=env, cwd=logs, capture_output=True, check=False
    )
    assert probe.returncode != 0, "the worker's python3 must not have rmqsim for this test"
    port = free_port()
    master_url = f"spark://127.0.0.1:{port}"
    master = ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
              "--port", str(port), "--webui-port", str(free_port())]  # fmt: skip
    worker = ["org.apache.spark.deploy.worker.Worker", master_url, "--host", "127.0.0.1",
              "--webui-port", str(free_port()), "--cores", str(CORES), "--memory", "2g",
              "--work-dir", str(logs / "work")]  # fmt: skip
    daemons: list[subprocess.Popen] = []
    try:
        for name, args in (("master", master), ("worker", worker)):
            with (logs / f"{name}.log").open("w") as log:
                daemons.append(
                    subprocess.Popen(
                        [spark_class(), *args],
                        env=env,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        cwd=logs,
                    )
                )
            if name == "master":
                wait_for(lambda: accepts(port), "the master", daemons)
        master_log = logs / "master.log"
        wait_for(lambda: "Registering worker" in master_log.read_text(), "the worker", daemons)
        yield master_url
    finally:
        stop(daemons)


def rmqsim(user_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``rmqsim ARGS`` run from the user's directory as a user would: a fresh driver
    process, no PYTHONPATH, no PYSPARK_PYTHON, and not in a git checkout (``GIT_DIR``
    names none), as an installed rmqsim is: the rows' code version and the traces'
    recorded commit are then the same whichever process ran them, and another
    engineer's commit between the two sweeps changes neither."""
    env = bare_env()
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env["GIT_DIR"] = str(user_dir / "no-such-git-dir")
    return subprocess.run(
        ["rmqsim", *args], cwd=user_dir, env=env, capture_output=True, text=True,
        timeout=600, check=False,
    )  # fmt: skip


def sweep(master: str, user_dir: Path, out: Path) -> subprocess.CompletedProcess[str]:
    """``rmqsim sweep`` of the user's adapter module."""
    impl = ["--impl", "my_adapter:factory"]
    return rmqsim(user_dir, "sweep", *SWEEP, *impl, "--master", master, "--out", str(out))


def rows(out: Path) -> list[dict]:
    """The sweep's rows, but the columns that differ by design; a map column as a dict (a
    Parquet map's entries have no order: Spark writes a JVM hash map's, pyarrow a dict's)."""
    table = ds.dataset(out / RUNS_DIR, format="parquet", partitioning="hive").to_table()
    maps = {field.name for field in table.schema if pa.types.is_map(field.type)}
    found = [{k: dict(v) if k in maps and v is not None else v
              for k, v in row.items() if k not in PER_SWEEP}
             for row in table.to_pylist()]  # fmt: skip
    return sorted(found, key=lambda r: (r["profile"], r["seed"], r["determinism_repeat"]))


def sweep_here(user_dir: Path, out: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same sweep's runs made in this process, without Spark: every task
    ``plan_chunks`` deals on ``CORES`` cores, run by ``run_chunk`` (the body of each Spark
    task), in the environment ``rmqsim`` had above (the user's module importable, no git
    checkout: the same code version and trace headers); the rows written as Parquet
    partitioned by profile, as the sweep writes them. The user's module is forgotten after."""
    monkeypatch.syspath_prepend(str(user_dir))
    monkeypatch.setenv("GIT_DIR", str(user_dir / "no-such-git-dir"))
    spec = TaskSpec(impl="my_adapter:factory", out_dir=str(out), sweep_id="here", steps=STEPS,
                    code_version=code_version.__wrapped__())  # fmt: skip
    try:
        made = [dict(zip(COLUMNS, row, strict=True))
                for chunk in plan_chunks(PROFILES, SEEDS, CORES, DETERMINISM_SAMPLE)
                for _, _, row in run_chunk(chunk, spec)]  # fmt: skip
    finally:  # a later test's own ``my_adapter`` must not find this one imported
        sys.modules.pop("my_adapter", None)
    table = pa.Table.from_pylist(made, schema=arrow_schema())
    pq.write_to_dataset(table, out / RUNS_DIR, partition_cols=["profile"])


def test_a_sweep_on_a_standalone_cluster_gives_the_rows_of_the_same_runs_here(
    cluster: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    user_dir = tmp_path / "project"
    user_dir.mkdir()
    (user_dir / "my_adapter.py").write_text(ADAPTER, encoding="utf-8")

    on_cluster = sweep(cluster, user_dir, tmp_path / "cluster-out")
    assert on_cluster.returncode == 0, on_cluster.stdout + on_cluster.stderr[-3000:]
    assert "6 runs" in on_cluster.stdout and "0 error(s)" in on_cluster.stdout
    report = rmqsim(user_dir, "report", str(tmp_path / "cluster-out"), "--master", cluster)
    assert report.returncode == 0, report.stdout + report.stderr[-3000:]
    assert report.stdout.startswith("rmqsim report: 6 runs, 0 failed")
    sweep_here(user_dir, tmp_path / "here-out", monkeypatch)

    cluster_rows, here_rows = rows(tmp_path / "cluster-out"), rows(tmp_path / "here-out")
    assert len(cluster_rows) >= 6
    assert {r["implementation"] for r in cluster_rows} == {"my_adapter:factory"}
    assert {r["status"] for r in cluster_rows} == {"ok"}
    assert cluster_rows == here_rows, differences(cluster_rows, here_rows)


def differences(found: list[dict], expected: list[dict]) -> list[str]:
    """Where two row lists differ: the run and column of each differing value."""
    if len(found) != len(expected):
        return [f"{len(found)} rows against {len(expected)}"]
    return [f"{row['profile']}/{row['seed']}/{row['determinism_repeat']} {column}: "
            f"{value!r} against {other[column]!r}"
            for row, other in zip(found, expected, strict=True)
            for column, value in row.items() if other.get(column) != value]  # fmt: skip
