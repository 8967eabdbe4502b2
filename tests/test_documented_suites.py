"""The contract-suite commands README.md and every page of docs/ show
(``RMQSIM_..._SIDES=name=MOD:FACTORY pytest tests/...``) work as written: run by the
``pytest`` console script from the
repository's root (whose ``sys.path`` holds neither the current directory nor the
repository), on a factory of the user's module, they collect and pass; a factory of the
wrong layer is refused at collection, naming it."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: A documented suite command: environment assignments, then ``pytest tests/...``.
COMMAND = re.compile(r"((?:RMQSIM_\w+=\S+ )+)pytest (tests/[\w/]+)")
#: The user's module: a stream factory (ours, by another name) and a queue factory.
USER_MODULE = """
from rmqsim.conformance.adapter import rocksmq_factory
from rmqsim.impl.stream import stream_factory


def open_streams(*, queue):
    return stream_factory(queue=queue)


def open_queue(*, path, config, clock, faults):
    return rocksmq_factory(path=path, config=config, clock=clock, faults=faults)
"""
#: The tests each run keeps to (the suite whole takes minutes): a file of each suite, after
#: collecting all of it.
SUBSET = {"tests/stream": "test_plain_contract"}


def documented_commands() -> list[tuple[dict[str, str], str]]:
    """``(environment, suite)`` of every documented command form, once each (its words
    joined across line breaks and Markdown quoting)."""
    found: list[tuple[dict[str, str], str]] = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        text = " ".join(doc.read_text().replace("`", " ").split())
        for assignments, suite in COMMAND.findall(text):
            env = dict(word.split("=", 1) for word in shlex.split(assignments))
            if (env, suite) not in found:
                found.append((env, suite))
    return found


def _run(tmp_path: Path, env: dict[str, str], suite: str) -> subprocess.CompletedProcess[str]:
    """The command as a user runs it from the repository's root: ``pytest`` (``-P``: no
    current directory on the path, as the console script), rmqsim and the user's module
    importable, the repository itself not on the path."""
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "rmqsim").symlink_to(ROOT / "rmqsim", target_is_directory=True)
    (site / "user_impl.py").write_text(USER_MODULE)
    environment = {**os.environ, "PYTHONPATH": str(site), **env}
    return subprocess.run(
        [sys.executable, "-P", "-m", "pytest", suite, "-v", "-n", "0", "-p", "no:cacheprovider",
         "-k", SUBSET[suite]],
        cwd=ROOT, env=environment, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip


def _with(env: dict[str, str], factory: str) -> dict[str, str]:
    """The documented assignments, ``MOD:FACTORY`` replaced by ``factory``."""
    return {name: value.replace("MOD:FACTORY", factory) for name, value in env.items()}


def test_the_docs_show_a_suite_command() -> None:
    assert ({"RMQSIM_STREAM_SIDES": "mine=MOD:FACTORY"}, "tests/stream") in documented_commands()


@pytest.mark.parametrize(
    ("env", "suite"),
    documented_commands(),
    ids=[" ".join([*env, suite]) for env, suite in documented_commands()],
)
def test_a_documented_suite_command_runs_as_written(
    tmp_path: Path, env: dict[str, str], suite: str
) -> None:
    done = _run(tmp_path, _with(env, "user_impl:open_streams"), suite)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert re.search(r"\d+ passed", done.stdout), done.stdout[-3000:]
    assert "[mine] PASSED" in done.stdout  # the user's side ran


def test_a_suite_refuses_a_factory_of_another_layer(tmp_path: Path) -> None:
    done = _run(tmp_path, {"RMQSIM_STREAM_SIDES": "mine=user_impl:open_queue"}, "tests/stream")
    assert done.returncode != 0
    assert "RMQSIM_STREAM_SIDES: --impl user_impl:open_queue is a queue factory, not a " \
        "stream factory(queue=)" in done.stdout + done.stderr  # fmt: skip
