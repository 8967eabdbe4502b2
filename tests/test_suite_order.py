"""The suite's order (tests/conftest.py): the slowest tests of tests/slow_tests.txt first,
for scripts/test.sh's pytest-xdist workers, and every name of that list still names a
test."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _conftest(config: pytest.Config) -> ModuleType:
    """tests/conftest.py as pytest loaded it (importing it again would make a second copy)."""
    for plugin in config.pluginmanager.get_plugins():
        if getattr(plugin, "__file__", None) == str(ROOT / "tests" / "conftest.py"):
            return plugin  # type: ignore[no-any-return]
    raise AssertionError("tests/conftest.py is not loaded")


class _Item:
    def __init__(self, nodeid: str) -> None:
        self.nodeid = nodeid

    def __repr__(self) -> str:
        return self.nodeid


class _NotQuick:
    """A pytest config without ``--quick``."""

    def getoption(self, name: str) -> bool:
        assert name == "quick"
        return False


def test_the_slowest_tests_come_first_in_their_order_and_the_rest_keep_theirs(
    pytestconfig: pytest.Config,
) -> None:
    conftest = _conftest(pytestconfig)
    slow_file, slow_test = "tests/test_crash_fidelity.py", "tests/test_fuzz.py::test_a[fuzz]"
    nodeids = [
        "tests/test_a.py::test_1",
        f"{slow_file}::test_x",
        "tests/test_fuzz.py::test_b",
        slow_test,
        f"{slow_file}::test_y",
        "tests/test_a.py::test_2",
    ]
    items: list[Any] = [_Item(n) for n in nodeids]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(conftest, "SLOWEST_FIRST", (slow_test, slow_file))
        conftest.pytest_collection_modifyitems(_NotQuick(), items)
    assert [item.nodeid for item in items] == [
        slow_test,
        f"{slow_file}::test_x",
        f"{slow_file}::test_y",
        "tests/test_a.py::test_1",
        "tests/test_fuzz.py::test_b",
        "tests/test_a.py::test_2",
    ]


def test_every_name_of_the_slowest_list_names_a_file_or_a_test_of_it(
    pytestconfig: pytest.Config,
) -> None:
    for name in _conftest(pytestconfig).SLOWEST_FIRST:
        path, _, test = name.partition("::")
        assert (ROOT / path).is_file(), name
        function = test.split("[", 1)[0]
        assert not function or f"def {function}(" in (ROOT / path).read_text(), name
