"""Starting Spark for rmqsim: a checked master URL, quiet logs, the right Python on the
workers, and one session per process.

Why the care: Spark's default logging buries a sweep's own output under INFO/WARN lines,
its console progress bar fights with ours, ``spark.driver.memory`` only counts before the
first session of a process (NOTES-dependencies.md), and a mistyped ``--master`` otherwise
surfaces as a Java stack trace.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from typing import TYPE_CHECKING

from rmqsim.conformance.cli_common import UsageError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
#: Driver heap: 10M report rows need more than Spark's 1g default.
DEFAULT_DRIVER_MEMORY = "4g"
#: Shuffle partitions: Spark's 200 is sized for clusters; a report's groupings are tiny and
#: adaptive execution coalesces further.
SHUFFLE_PARTITIONS = 16

#: Loggers Py4J logs a call into the JVM that an interruption cut short to (it uses the
#: root logger too).
PY4J_LOGGERS = ("", "py4j.java_gateway", "py4j.clientserver")

#: How long to wait for a standalone master to accept a connection, seconds.
MASTER_CONNECT_TIMEOUT_S = 5.0

#: Master URLs Spark accepts: local, local[N], local[*], local[N,F], local-cluster[...],
#: spark://host:port[,host:port...] (standalone, with HA masters), yarn, k8s://...
_MASTER = re.compile(
    r"local(\[(\*|[1-9]\d*)(,[1-9]\d*)?\])?"
    r"|local-cluster\[[1-9]\d*,[1-9]\d*,[1-9]\d*\]"
    r"|spark://[A-Za-z0-9.\-_]+:\d{1,5}(,[A-Za-z0-9.\-_]+:\d{1,5})*"
    r"|yarn"
    r"|k8s://\S+"
)


def check_master(master: str) -> str:
    """``master`` unchanged when it is a Spark master URL, else ``UsageError``."""
    if not _MASTER.fullmatch(master):
        raise UsageError(
            f"--master {master!r} is not a Spark master URL "
            "(local[*], local[N], spark://host:7077, yarn, k8s://...)"
        )
    return master


def check_reachable(master: str, timeout_s: float = MASTER_CONNECT_TIMEOUT_S) -> None:
    """For a standalone ``spark://`` master, ``UsageError`` unless one of its addresses
    accepts a TCP connection: Spark itself would retry for a minute, then fail vaguely."""
    if not master.startswith("spark://"):
        return
    errors = []
    for address in master.removeprefix("spark://").split(","):
        host, _, port = address.rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=timeout_s):
                return
        except OSError as exc:
            errors.append(f"{address} ({exc.strerror or exc})")
    raise UsageError(f"--master {master}: cannot connect to {', '.join(errors)}")


def is_local(master: str) -> bool:
    return master.startswith("local")


def _root_cause(exc: Exception) -> str:
    """One line: the innermost Java cause of a Py4J error, else the Python message."""
    java = getattr(exc, "java_exception", None)
    if java is not None:
        while java.getCause() is not None:
            java = java.getCause()
        text = str(java.toString())
    else:
        text = str(exc)
    lines = text.strip().splitlines()
    return lines[0] if lines else type(exc).__name__


@contextmanager
def spark_session(
    master: str = DEFAULT_MASTER,
    app_name: str = "rmqsim",
    *,
    driver_memory: str = DEFAULT_DRIVER_MEMORY,
) -> Iterator[SparkSession]:
    """A Spark session on ``master``; stopped on exit unless it was already running.

    A session already active in this process (a test's shared fixture, a notebook) is
    reused as it is, whatever its master: Spark allows one per process.
    """
    check_master(master)
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        yield active
        return
    check_reachable(master)
    for name in PY4J_LOGGERS:
        logging.getLogger(name).addFilter(_QUIET_INTERRUPTS)
    log_config = resources.files("reports").joinpath("log4j2.properties")
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.driver.memory", driver_memory)
        .config("spark.driver.extraJavaOptions", f"-Dlog4j.configurationFile=file:{log_config}")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", str(SHUFFLE_PARTITIONS))
        .config("spark.sql.session.timeZone", "UTC")
    )
    if is_local(master) and "PYSPARK_PYTHON" not in os.environ:
        # The workers must import rmqsim: in local mode, run them on this very interpreter
        # (PySpark reads the variable when the context starts; the conf key is only honoured
        # by spark-submit).
        os.environ["PYSPARK_PYTHON"] = sys.executable
    with workers_scratch(master):
        try:
            spark = builder.getOrCreate()
        except Exception as exc:  # Java's errors arrive as Py4J/Runtime errors with long text
            cause = _root_cause(exc)
            raise UsageError(f"--master {master}: Spark could not start: {cause}") from None
        spark.sparkContext.setLogLevel("ERROR")
        try:
            yield spark
        finally:
            spark.stop()


class _QuietInterrupts(logging.Filter):
    """Drops Py4J's log of a call into the JVM cut short by Ctrl-C or SIGTERM (a traceback
    on stderr): rmqsim says in one line that it was interrupted."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        for _ in range(16):  # the interruption, or what it caused (a Py4JNetworkError)
            if error is None:
                return True
            if isinstance(error, KeyboardInterrupt):
                return False
            error = error.__cause__ or error.__context__ or getattr(error, "cause", None)
        return True


_QUIET_INTERRUPTS = _QuietInterrupts()


@contextmanager
def workers_scratch(master: str) -> Iterator[None]:
    """With a local ``master``, the workers (which inherit the driver's environment) make
    their temporary directories in one of the driver's, removed after the session: a
    worker killed as Spark stops (the driver was interrupted, say) leaves nothing behind.
    Other masters' workers use their own ``RMQSIM_WORKDIR`` or scratch directory."""
    if not is_local(master):
        yield
        return
    from rmqsim.conformance.scratch import WORKDIR_ENV, scratch_root

    before = os.environ.get(WORKDIR_ENV)
    with tempfile.TemporaryDirectory(
        prefix="rmqsim-spark-", dir=scratch_root(), ignore_cleanup_errors=True
    ) as scratch:
        os.environ[WORKDIR_ENV] = scratch
        try:
            yield
        finally:
            if before is None:
                os.environ.pop(WORKDIR_ENV, None)
            else:
                os.environ[WORKDIR_ENV] = before
