"""The layout's old import paths keep working (``rmqsim.moved``): a user's code written
against a module before it moved into a layer or function subpackage runs unchanged."""

from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys

import pytest

from rmqsim.moved import MOVED


@pytest.mark.parametrize(("old", "new"), sorted(MOVED.items()))
def test_an_old_name_is_the_moved_module(old: str, new: str) -> None:
    assert importlib.import_module(old) is importlib.import_module(new)


def test_an_old_factory_path_loads_as_an_impl() -> None:
    """``--impl MODULE:FACTORY`` through an old module name (a fresh process: no module
    is imported yet under either name)."""
    code = ("from rmqsim.conformance.power_loss import power_loss_sweep as old\n"
            "from rmqsim.conformance.crashing.power_loss import power_loss_sweep as new\n"
            "assert old is new\n"
            "import rmqsim.conformance.layers.queue as q\n"
            "print(q.__name__)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "rmqsim.conformance.queue.layer"


def test_a_name_that_never_existed_is_still_missing() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("rmqsim.conformance.no_such_module")


def test_every_new_name_exists_and_no_old_file_is_left() -> None:
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    for old, new in MOVED.items():
        assert importlib.util.find_spec(new) is not None, new
        old_file = root / (old.removeprefix("rmqsim.").replace(".", "/") + ".py")
        assert not old_file.exists(), f"{old_file} is back beside its new place {new}"
