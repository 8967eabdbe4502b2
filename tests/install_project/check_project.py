"""The user project's tests (collected as ``check_*.py``, see pytest.ini): rmqsim installed
from its wheel, its pytest plugin loaded through the ``pytest11`` entry point, and the
project's own ``model`` and ``reports`` packages imported, not rmqsim's."""

import sys
from pathlib import Path

import pytest

import model
import reports
import rmqsim

PROJECT = Path(__file__).resolve().parent
#: Bare names rmqsim's folders have in its source tree, which the project does not have.
RMQSIM_FOLDERS = ("impl", "scenarios", "conformance")


def test_the_projects_own_packages_are_imported():
    assert Path(model.__file__).parent.parent == PROJECT and model.OWNER == "install_project"
    assert Path(reports.__file__).parent.parent == PROJECT and reports.OWNER == "install_project"


def test_rmqsim_and_its_plugin_come_from_the_installed_wheel():
    plugin = sys.modules["rmqsim.conformance.pytest_plugin"]
    for module in (rmqsim, plugin):
        assert Path(module.__file__).is_relative_to(Path(sys.prefix) / "lib"), module.__file__


@pytest.mark.rmqsim_gate(impl="mymq:open_queue", seeds="0:2", profiles="smoke")
def test_conformance(rmqsim_gate):
    gate = rmqsim_gate.check()
    assert gate.ok
    assert sys.modules["model"] is model and sys.modules["reports"] is reports
    assert Path(sys.modules["rmqsim.model"].__file__).is_relative_to(Path(sys.prefix) / "lib")
    assert [name for name in RMQSIM_FOLDERS if name in sys.modules] == []
