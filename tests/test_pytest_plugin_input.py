"""The pytest plugin's bad input: pytest's own usage error before any test runs.

Each case runs ``python -m pytest`` in a fresh directory with a test that asks for the
``rmqsim_gate`` fixture (the plugin found through its ``pytest11`` entry point), as
``tests/test_pytest_plugin.py`` does, and expects exit 4 (pytest's usage error), one
``ERROR: ...`` line that names the bad option and what is wrong with it, no traceback and
no test run. Nothing here runs a gate: every case stops before the first run.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

#: pytest's exit code of a usage error (``pytest.ExitCode.USAGE_ERROR``).
USAGE_ERROR = 4
#: What a traceback, a collection error or a test's own error would show.
NOT_CLEAN = ("Traceback", "During handling", "Interrupted", "Error:", "rmqsim_gate.check()")

GATE_TEST = """
def test_gate(rmqsim_gate):
    rmqsim_gate.check()
"""


def run_pytest(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def make_project(root: Path, tests: str = GATE_TEST) -> Path:
    """``root/tests/test_gate.py``, as a user's project lays it out."""
    (root / "tests").mkdir()
    (root / "tests" / "test_gate.py").write_text(textwrap.dedent(tests))
    return root


def usage_error(done: subprocess.CompletedProcess[str]) -> str:
    """The one ``ERROR:`` line of a clean usage error (asserting that it is one)."""
    output = done.stdout + done.stderr
    assert done.returncode == USAGE_ERROR, output
    errors = [line for line in output.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 1, output
    assert [marker for marker in NOT_CLEAN if marker in output] == [], output
    assert "passed" not in output and "failed" not in output, output
    return errors[0]


def test_bad_seeds_are_a_usage_error(tmp_path: Path) -> None:
    done = run_pytest(make_project(tmp_path), "--rmqsim-seeds", "x")
    assert usage_error(done) == "ERROR: --rmqsim-seeds: 'x' is not a seed range like 0:200"


def test_an_unknown_profile_is_a_usage_error_naming_the_known_ones(tmp_path: Path) -> None:
    done = run_pytest(make_project(tmp_path), "--rmqsim-profile", "smoke,nosuch")
    line = usage_error(done)
    assert line.startswith("ERROR: --rmqsim-profile: unknown profile 'nosuch'; known profiles: ")
    assert "smoke, crashy," in line


def test_an_impl_that_cannot_be_imported_is_a_usage_error(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    expected = "ERROR: --rmqsim-impl nosuch:x: cannot import 'nosuch': No module named 'nosuch'"
    for profiles in (("--rmqsim-profile", "smoke"), ()):  # given, or by the impl's layer
        done = run_pytest(project, "--rmqsim-impl", "nosuch:x", "--rmqsim-seeds", "0:1", *profiles)
        assert usage_error(done) == expected
    done = run_pytest(project, "--rmqsim-impl", "rmqsim.conformance.adapter:nosuch")
    assert usage_error(done) == (
        "ERROR: --rmqsim-impl rmqsim.conformance.adapter:nosuch: rmqsim.conformance.adapter "
        "has no attribute 'nosuch'"
    )


def test_a_markers_impl_that_cannot_be_imported_is_a_usage_error(tmp_path: Path) -> None:
    project = make_project(
        tmp_path,
        """
        import pytest

        @pytest.mark.rmqsim_gate(impl="nosuch:x", profiles="smoke", seeds="0:1")
        def test_gate(rmqsim_gate):
            rmqsim_gate.check()
        """,
    )
    assert usage_error(run_pytest(project)) == (
        "ERROR: tests/test_gate.py::test_gate[smoke]: rmqsim_gate marker: --impl nosuch:x: "
        "cannot import 'nosuch': No module named 'nosuch'"
    )


def test_an_adapter_beside_the_tests_is_still_found(tmp_path: Path) -> None:
    """Found only once pytest has put ``tests/`` on ``sys.path`` (collection), so not a
    usage error when the options are checked; ``--collect-only``: no gate runs."""
    project = make_project(tmp_path)
    (project / "tests" / "mymq_adapter.py").write_text(
        "from rmqsim.conformance.adapter import rocksmq_factory as open_queue\n"
    )
    done = run_pytest(project, "--collect-only", "--rmqsim-impl", "mymq_adapter:open_queue")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "test_gate[smoke]" in done.stdout


def test_an_impl_of_the_wrong_layer_fails_in_one_line(tmp_path: Path) -> None:
    """Known only when the profile runs: the test fails with one line, no chained error."""
    done = run_pytest(
        make_project(tmp_path),
        "--rmqsim-impl", "stream", "--rmqsim-profile", "smoke", "--rmqsim-seeds", "0:1",
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert "rmqsim: --impl stream is a stream factory; a queue profile needs" in output
    assert "During handling" not in output and "Traceback" not in output, output


def test_an_out_dir_that_cannot_be_created_is_a_usage_error(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    (project / "a-file").write_text("")
    done = run_pytest(
        project,
        "--rmqsim-impl", "rmqsim.conformance.mutants.classic:page_boundary_skip",
        "--rmqsim-out", str(project / "a-file" / "x"),
        "--rmqsim-profile", "smoke", "--rmqsim-seeds", "0:1",
    )  # fmt: skip
    assert usage_error(done) == (
        f"ERROR: --rmqsim-out {project / 'a-file' / 'x'}: not a writable directory "
        "(Not a directory)"
    )
    assert "NotADirectoryError" not in done.stdout + done.stderr
