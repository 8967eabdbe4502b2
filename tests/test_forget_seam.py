"""The adapter's public seam ``rmqsim_forget(path)`` (docs/ADAPTER.md "State kept outside
path"): a queue that keeps state outside its path hears, once, that its run is over."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rmqsim.conformance.adapter import KeepsStateOutsidePath, make_model_factory
from rmqsim.conformance.running.run import run_seed
from rmqsim.model import ReferenceMQ

FORGOTTEN: list[Path] = []


class _Remembering:
    """The model as a SUT, noting each ``rmqsim_forget`` it hears."""

    def __init__(self, **kwargs: Any) -> None:
        self._inner = make_model_factory(ReferenceMQ)(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def crash(self) -> None:
        self._inner.crash()

    def rmqsim_forget(self, path: Path) -> None:
        FORGOTTEN.append(path)
        self._inner.rmqsim_forget(path)


def remembering_factory(**kwargs: Any) -> Any:
    return _Remembering(**kwargs)


remembering_factory.rmqsim_layer = "queue"  # type: ignore[attr-defined]


def test_a_queue_with_the_seam_hears_once_that_its_run_is_over() -> None:
    FORGOTTEN.clear()
    result = run_seed("crashy", 2, steps=60, impl=remembering_factory)
    assert result.ok
    assert len(FORGOTTEN) == 1 and FORGOTTEN[0].name == "sut"
    assert issubclass(_Remembering, KeepsStateOutsidePath)
