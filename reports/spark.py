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
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from rmqsim.conformance.adapter import Factory
from rmqsim.conformance.errors import UsageError
from rmqsim.reports.jvm_archive import (
    DRIVER_JAVA_OPTIONS,
    archive_path,
    ensure_archive,
    use_options,
)
from rmqsim.reports.shipping import archive_spec, executor_python, impl_code, package_zip

__all__ = [
    "DEFAULT_DRIVER_MEMORY",
    "DEFAULT_MASTER",
    "MASTER_CONNECT_TIMEOUT_S",
    "PY4J_LOGGERS",
    "QUICK_START_JVM_OPTIONS",
    "SHUFFLE_PARTITIONS",
    "Shipping",
    "check_master",
    "check_reachable",
    "class_archive",
    "is_local",
    "ship_code",
    "spark_context",
    "spark_session",
    "workers_scratch",
]

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

T = TypeVar("T")

DEFAULT_MASTER = "local[*]"
#: Driver heap: 10M report rows need more than Spark's 1g default.
DEFAULT_DRIVER_MEMORY = "4g"
#: Shuffle partitions: Spark's 200 is sized for clusters; a report's groupings are tiny and
#: adaptive execution coalesces further.
SHUFFLE_PARTITIONS = 16

#: Loggers Py4J logs a call into the JVM that an interruption cut short to (it uses the
#: root logger too).
PY4J_LOGGERS = ("", "py4j.java_gateway", "py4j.clientserver")

#: JVM options of a quick start: the JIT's first tier only (the optimizing compiler's
#: threads cost more CPU than a short session gains from them) and a single-threaded
#: collector (2 cores shared).
QUICK_START_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"

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


@dataclass(frozen=True, slots=True)
class Shipping:
    """What a session's Python tasks need on a cluster's executors (``reports.shipping``):
    the implementation they run (None: none), rmqsim itself (shipped whenever ``impl`` is
    given; ``rmqsim`` asks for it without one: a report's tasks run rmqsim's aggregation
    code) and a packed Python environment (``--archives FILE[#ALIAS]``, None: none)."""

    impl: str | Factory | None = None
    archives: str | None = None
    rmqsim: bool = False


def _new_conf(
    master: str, app_name: str, driver_memory: str, shipping: Shipping, quick_start: bool
) -> tuple[dict[str, str], str | None, Path | None]:
    """The configuration of a new session or context on ``master``, the alias its shipped
    environment is unpacked under (None: none) and the driver JVM's class archive it maps
    (``reports.jvm_archive``, built first if need be; a quick start's only, None: none).
    ``UsageError`` when the master is not reachable or an archive is given for a local
    master."""
    check_reachable(master)
    archive, alias = archive_spec(shipping.archives) if shipping.archives else (None, None)
    if archive is not None and is_local(master):
        raise UsageError(f"--archives is for a cluster's executors, not --master {master}")
    java_options = QUICK_START_JVM_OPTIONS if quick_start else ""
    classes = class_archive(driver_memory) if quick_start else None
    if classes is not None:
        java_options = f"{java_options} {use_options(classes)}"
    return _conf(master, app_name, driver_memory, archive, java_options), alias, classes


def class_archive(driver_memory: str = DEFAULT_DRIVER_MEMORY) -> Path | None:
    """The driver's class archive (``reports.jvm_archive``) a quick start maps, built first
    when there is none (None when archives are off or it could not be built)."""
    classes = archive_path()
    if classes is None:
        return None
    served = _conf("local[1]", "rmqsim class archive", driver_memory, None,
                   QUICK_START_JVM_OPTIONS)  # fmt: skip
    return classes if ensure_archive(classes, served) else None


def _create(
    create: Callable[[dict[str, str]], T], settings: dict[str, str], classes: Path | None
) -> T:
    """``create(settings)``; if the JVM could not start while mapping the class archive
    ``classes`` (one damaged since it was built), the archive is removed and the start
    retried without it."""
    try:
        return create(settings)
    except Exception:
        if classes is None:
            raise
        classes.unlink(missing_ok=True)
        java = settings[DRIVER_JAVA_OPTIONS].replace(use_options(classes), "").strip()
        return create({**settings, DRIVER_JAVA_OPTIONS: java})


@contextmanager
def spark_session(
    master: str = DEFAULT_MASTER,
    app_name: str = "rmqsim",
    *,
    driver_memory: str = DEFAULT_DRIVER_MEMORY,
    shipping: Shipping = Shipping(),
    quick_start: bool = False,
) -> Iterator[SparkSession]:
    """A Spark session on ``master``; stopped on exit unless it was already running.

    ``quick_start``: the driver's JVM (in local mode, the executors' too) runs with
    ``QUICK_START_JVM_OPTIONS``, for sessions whose JVM does little work (a sweep, whose
    tasks run in Python; a report over few rows): half the CPU of a session's start and
    first jobs, measured on 1,000 report rows.

    The executors run ``executor_python`` (this interpreter unless ``PYSPARK_PYTHON`` or
    ``shipping.archives`` says otherwise). On a cluster, rmqsim and the module of
    ``shipping.impl`` are shipped to them (``reports.shipping``); a local master's workers
    import them as the driver does. A session already active in this process (a test's
    shared fixture, a notebook) is reused as it is, whatever its master: Spark allows one
    per process.
    """
    check_master(master)
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        yield active
        return
    conf, alias, classes = _new_conf(master, app_name, driver_memory, shipping, quick_start)

    def create(settings: dict[str, str]) -> SparkSession:
        builder = SparkSession.builder
        for key, value in settings.items():
            builder = builder.config(key, value)
        return builder.getOrCreate()

    with (
        _started(master, alias, lambda: _create(create, conf, classes)) as spark,
        _shipped(spark.sparkContext, master, shipping),
    ):
        yield spark


@contextmanager
def spark_context(
    master: str = DEFAULT_MASTER,
    app_name: str = "rmqsim",
    *,
    driver_memory: str = DEFAULT_DRIVER_MEMORY,
    shipping: Shipping = Shipping(),
    quick_start: bool = False,
) -> Iterator[SparkContext]:
    """``spark_session``'s context without a Spark SQL session, for work that runs only
    Python tasks (a report: its tasks aggregate with pyarrow): the same configuration,
    Python, shipping and reuse of an active session's context, ≈ 2 CPU s less to start
    than a session (the JVM's SQL session state is never built)."""
    check_master(master)
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        yield active.sparkContext
        return
    settings, alias, classes = _new_conf(master, app_name, driver_memory, shipping, quick_start)

    def create(chosen: dict[str, str]) -> SparkContext:
        return SparkContext(conf=SparkConf().setAll(list(chosen.items())))

    with (
        _started(master, alias, lambda: _create(create, settings, classes)) as sc,
        _shipped(sc, master, shipping),
    ):
        yield sc


@contextmanager
def _started(master: str, alias: str | None, create: Callable[[], T]) -> Iterator[T]:
    """``create()``'s session or context, started with the executors' Python and scratch
    set, quiet, stopped on exit; a failure to start is a ``UsageError``."""
    for name in PY4J_LOGGERS:
        logging.getLogger(name).addFilter(_QUIET_INTERRUPTS)
    with workers_scratch(master), _executor_python(executor_python(alias)):
        try:
            started = create()
        except Exception as exc:  # Java's errors arrive as Py4J/Runtime errors with long text
            cause = _root_cause(exc)
            raise UsageError(f"--master {master}: Spark could not start: {cause}") from None
        context: Any = getattr(started, "sparkContext", started)
        context.setLogLevel("ERROR")
        try:
            yield started
        finally:
            started.stop()  # type: ignore[attr-defined]


@contextmanager
def _shipped(sc: SparkContext, master: str, shipping: Shipping) -> Iterator[None]:
    """What ``shipping`` asks for sent to a cluster's executors for the block."""
    with tempfile.TemporaryDirectory(prefix="rmqsim-ship-") as ship_dir:
        if (shipping.impl is not None or shipping.rmqsim) and not is_local(master):
            ship_code(sc, shipping.impl, Path(ship_dir))
        yield


def _conf(
    master: str, app_name: str, driver_memory: str, archive: str | None, java_options: str
) -> dict[str, str]:
    """The session's configuration: quiet, no UI, small shuffles, UTC."""
    log_config = resources.files("rmqsim.reports").joinpath("log4j2.properties")
    java = f"-Dlog4j.configurationFile=file:{log_config} {java_options}".strip()
    conf = {
        "spark.master": master,
        "spark.app.name": app_name,
        "spark.driver.memory": driver_memory,
        DRIVER_JAVA_OPTIONS: java,
        "spark.ui.showConsoleProgress": "false",
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": str(SHUFFLE_PARTITIONS),
        "spark.sql.session.timeZone": "UTC",
    }
    if archive is not None:
        conf["spark.archives"] = archive
    return conf


@contextmanager
def _executor_python(python: str) -> Iterator[None]:
    """``PYSPARK_PYTHON`` set to ``python`` while the context starts: PySpark reads the
    variable then, for every task's Python worker (``spark.pyspark.python`` is only
    honoured by spark-submit)."""
    before = os.environ.get("PYSPARK_PYTHON")
    os.environ["PYSPARK_PYTHON"] = python
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("PYSPARK_PYTHON", None)
        else:
            os.environ["PYSPARK_PYTHON"] = before


def ship_code(sc: SparkContext, impl: str | Factory | None, ship_dir: Path) -> None:
    """Send rmqsim and ``impl``'s module (if any) to the executors
    (``SparkContext.addPyFile``); the files are built under ``ship_dir``, which outlives
    the session's tasks."""
    sc.addPyFile(str(package_zip(ship_dir)))
    code = impl_code(impl, ship_dir) if impl is not None else None
    if code is not None:
        sc.addPyFile(str(code))


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
    from rmqsim.conformance.running.scratch import WORKDIR_ENV, scratch_root

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
