"""The pytest plugin, used from a separate temporary project that brings its own queue.

Each case runs ``python -m pytest`` in a fresh directory (its own modules, no rmqsim
conftest), as a user's CI would: the plugin is found through its ``pytest11`` entry point.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

#: The user's adapter module: a correct queue (a thin wrapper on rmqsim's RocksMQ) and a
#: wrong one (the model delivering the last message of a poll twice).
USER_ADAPTER = """
from rmqsim.model import ReferenceMQ
from rmqsim.conformance.adapter import make_model_factory


def open_queue(*, path, config, clock, faults):
    from rmqsim.impl import RocksMQ

    return RocksMQ.open(path, config=config, clock=clock, faults=faults)


class DoublesLast(ReferenceMQ):
    def consume(self, topic, group, n):
        found = super().consume(topic, group, n)
        return [*found, found[-1]] if len(found) >= 2 else found


wrong_queue = make_model_factory(DoublesLast)
"""


REPO_CORPUS_FILE = sorted((Path(__file__).resolve().parent.parent / "regressions").glob("*.jsonl"))[
    0
]


def run_pytest(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-v", *args],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def make_project(root: Path, tests: str) -> Path:
    (root / "mymq.py").write_text(USER_ADAPTER)
    (root / "test_queue.py").write_text(textwrap.dedent(tests))
    return root


def test_a_correct_user_queue_passes_with_one_test_per_profile(tmp_path: Path) -> None:
    project = make_project(
        tmp_path,
        """
        def test_gate(rmqsim_gate):
            rmqsim_gate.check()

        def test_plain():
            assert True
        """,
    )
    # A corpus of the project's own adds a [regressions] item.
    corpus = project / "regressions"
    corpus.mkdir()
    shutil.copy(REPO_CORPUS_FILE, corpus)
    done = run_pytest(
        project,
        "--rmqsim-impl",
        "mymq:open_queue",
        "--rmqsim-seeds",
        "0:1",
        "--rmqsim-profile",
        "smoke",
        "--rmqsim-profile",
        "retention,churn",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for profile in ("smoke", "retention", "churn", "regressions"):
        assert f"test_gate[{profile}] PASSED" in done.stdout
    assert "5 passed" in done.stdout


def test_a_wrong_user_queue_fails_with_the_report_and_the_repro(tmp_path: Path) -> None:
    project = make_project(
        tmp_path,
        """
        import pytest

        @pytest.mark.rmqsim_gate(impl="mymq:wrong_queue", seeds="0:4", profiles="smoke")
        def test_gate(rmqsim_gate):
            rmqsim_gate.check()
        """,
    )
    done = run_pytest(project, "--rmqsim-out", str(tmp_path / "out"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "test_gate[smoke] FAILED" in done.stdout
    assert "DIVERGENCE duplicate" in done.stdout
    assert "repro      rmqsim run --profile smoke --seed" in done.stdout
    assert "--impl mymq:wrong_queue" in done.stdout
    assert list((tmp_path / "out").glob("smoke-seed*-duplicate.jsonl"))


def test_the_plugin_is_inert_in_a_project_that_does_not_use_it(tmp_path: Path) -> None:
    project = make_project(
        tmp_path,
        """
        import sys

        def test_plain():
            heavy = ("rmqsim.conformance.running.gate", "rmqsim.conformance.running.lockstep",
                     "impl")
            assert [m for m in heavy if m in sys.modules] == []
        """,
    )
    done = run_pytest(project)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


def test_a_bad_profile_is_a_usage_error(tmp_path: Path) -> None:
    project = make_project(tmp_path, "def test_gate(rmqsim_gate):\n    rmqsim_gate.check()\n")
    done = run_pytest(project, "--rmqsim-profile", "no-such-profile")
    assert done.returncode != 0 and "no-such-profile" in done.stdout + done.stderr
    assert "passed" not in done.stdout


def test_the_default_profiles_are_those_of_the_impls_layer(tmp_path: Path) -> None:
    """A stream factory gets the stream gate profiles, a push consumer the consumer ones,
    a queue the queue's (as ``rmqsim gate --impl``)."""
    from rmqsim.conformance.running.gate import (
        GATE_CONSUMER_PROFILES,
        GATE_PROFILES,
        GATE_STREAM_PROFILES,
    )

    project = make_project(tmp_path, "def test_gate(rmqsim_gate):\n    rmqsim_gate.check()\n")
    for impl, profiles in (
        ("stream", GATE_STREAM_PROFILES),
        ("rmqsim.conformance.consumer.run:impl_consumer_factory", GATE_CONSUMER_PROFILES),
        ("mymq:open_queue", GATE_PROFILES),
    ):
        done = run_pytest(project, "--collect-only", "--rmqsim-impl", impl)
        assert done.returncode == 0, done.stdout + done.stderr
        items = re.findall(r"<Function test_gate\[([^\]]+)\]>", done.stdout)
        assert items == list(profiles), (impl, done.stdout)
