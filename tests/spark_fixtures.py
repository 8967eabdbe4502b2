"""A pytest plugin (``pytest_plugins`` in tests/conftest.py): one local Spark session per
test process, shared by the test modules that run sweeps and reports in-process
(tests/test_reports_spark.py, test_reports_partials.py, test_reports_stream.py).

Why: each of those modules used to start and stop a session of its own. The driver's JVM
outlives a stopped session (pyspark reuses it), but every new session still starts a new
context, new Python workers (≈ 2 s before the first task runs) and has them import rmqsim
again; a session started once per pytest-xdist worker and kept serves them all, and
those modules are one unit of work (tests/lanes.py's ``SHARED_SPARK``), so that one
worker starts it rather than each that ran one of them. The commands the modules run
(``rmqsim sweep``, ``rmqsim report``, ``gate --spark``) reuse an active session as they
would a notebook's (``reports.spark.spark_session``).

The session is started as those commands start theirs: ``local[2]`` (two cores: tasks
really run in parallel) with ``quick_start``. Tests that check a command's own start (the
class archive, a cluster) run the command in a process of its own and so still start
their own session.

Its start sets environment variables for the JVM and its Python workers
(``PYSPARK_PYTHON``, ``RMQSIM_WORKDIR``) and, here, ``PYTHONPATH`` with the repository
first (so the workers import ``tests.spark_impls`` by name). The JVM keeps the copy it
was started with; this process gets its own values back right after the start, so that
the tests that run later on the same worker do not inherit them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: The shared session's master: what every module sharing it used to start.
SHARED_MASTER = "local[2]"


def _started_env() -> tuple[str, ...]:
    """The variables a session's start changes in this process (see the module's doc)."""
    from rmqsim.conformance.running.scratch import WORKDIR_ENV

    return ("PYSPARK_PYTHON", WORKDIR_ENV, "PYTHONPATH")


def restore_env(saved: dict[str, str | None]) -> None:
    """Set each variable of ``saved`` back to its value there (None: unset)."""
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(scope="session")
def shared_spark() -> Iterator[Any]:
    """The test process's one local Spark session (``SparkSession``), started at the
    first test that asks for it and stopped when the process's tests end."""
    from rmqsim.reports.spark import spark_session

    saved = {name: os.environ.get(name) for name in _started_env()}
    path = saved["PYTHONPATH"]
    os.environ["PYTHONPATH"] = f"{ROOT}{os.pathsep}{path}" if path else str(ROOT)
    with ExitStack() as stack:
        try:
            session = stack.enter_context(
                spark_session(SHARED_MASTER, "rmqsim tests", quick_start=True)
            )
        finally:
            restore_env(saved)
        yield session
        # Leaving the stack stops the session and sets the variables back to the values
        # its start found: ``saved``'s, as they already are.
