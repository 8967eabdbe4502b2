"""The core install needs none of the ``spark`` extra's modules: rmqsim runs in a process
where importing pyspark, pyarrow (and the rest of the extra) fails, as it does after a
plain ``pip install rmqsim``. ``--help`` and the gate work there; the commands that need
the extra name the ``pip install`` that fixes it (exit 2, one line, no traceback)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from rmqsim.conformance.cli.common import SPARK_EXTRA_INSTALL, SPARK_EXTRA_MODULES
from rmqsim.conformance.running.scratch import WORKDIR_ENV

ROOT = Path(__file__).resolve().parent.parent
#: Runs ``rmqsim`` with a meta path finder first that refuses the extra's modules.
WITHOUT_EXTRA = """
import sys

BLOCKED = set(sys.argv.pop(1).split(","))


class Blocker:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, Blocker())
for name in list(sys.modules):
    if name.partition(".")[0] in BLOCKED:
        del sys.modules[name]
sys.argv[0] = "rmqsim"
from rmqsim.conformance.cli import main

main()
"""


def _rmqsim(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "work").mkdir(exist_ok=True)
    path = os.environ.get("PYTHONPATH")
    env = dict(
        os.environ,
        PYTHONPATH=f"{ROOT}{os.pathsep}{path}" if path else str(ROOT),
        **{WORKDIR_ENV: str(tmp_path / "work")},
    )
    blocked = ",".join(sorted(SPARK_EXTRA_MODULES))
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_EXTRA, blocked, *args],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def test_the_extra_holds_what_only_reports_use() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = {req.split(">")[0].split("<")[0].split("=")[0] for req in project["dependencies"]}
    spark = {req.split(">")[0].split("<")[0] for req in project["optional-dependencies"]["spark"]}
    assert not core & SPARK_EXTRA_MODULES
    assert spark == SPARK_EXTRA_MODULES - {"py4j"}  # py4j comes with pyspark
    assert "rmqsim[spark]" in project["optional-dependencies"]["dev"]


def test_help_and_the_gate_work_without_the_extra(tmp_path: Path) -> None:
    helped = _rmqsim(tmp_path, "--help")
    assert helped.returncode == 0, helped.stderr
    assert "report" in helped.stdout and SPARK_EXTRA_INSTALL in helped.stdout
    gate = _rmqsim(
        tmp_path,
        *("gate", "--profiles", "smoke,consumer", "--seeds", "0:2", "--jobs", "1"),
        *("--no-crash-sweep", "--out", "out"),
    )
    assert gate.returncode == 0, gate.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["status"] == "ok"


@pytest.mark.parametrize(
    "args",
    [
        ("report", "X"),
        ("sweep", "--seeds", "0:2"),
        ("sweep-bench",),
        ("gate", "--spark", "--seeds", "0:1"),
    ],
    ids=lambda args: " ".join(args[:2]),
)
def test_a_command_that_needs_the_extra_names_the_pip_install(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    done = _rmqsim(tmp_path, *args)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith(f"rmqsim: error: rmqsim {args[0]}")
    assert f"it comes with the spark extra ({SPARK_EXTRA_INSTALL})" in done.stderr
