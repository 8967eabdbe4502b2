"""How rmqsim opens the implementation under test (the SUT).

An implementation is a *factory*: ``factory(path=..., config=..., clock=..., faults=...)``
returns a ``model.api.MessageQueue`` that also has ``crash()``. Reopening after a crash or
a close calls the factory again on the same path. ``--impl module:attribute`` names a
user's own factory; ``DEFAULT_IMPL`` is ours (``impl.RocksMQ``).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Protocol

from model.api import Clock, MessageQueue, MQConfig

DEFAULT_IMPL = "conformance.adapter:rocksmq_factory"
MODEL_IMPL = "conformance.adapter:model_factory"

FaultHook = Callable[[str], None]


class Factory(Protocol):
    """Opens (or reopens) a queue at ``path``."""

    def __call__(
        self, *, path: Path, config: MQConfig, clock: Clock, faults: FaultHook | None
    ) -> MessageQueue: ...


class BadImplError(Exception):
    """``--impl`` does not name a usable factory; the message says why."""


def rocksmq_factory(
    *, path: Path, config: MQConfig, clock: Clock, faults: FaultHook | None
) -> MessageQueue:
    """Our implementation: RocksMQ on RocksDB."""
    from impl import RocksMQ

    return RocksMQ.open(path, config=config, clock=clock, faults=faults)


class _CrashableModel:
    """The reference model as a SUT: "crash" keeps nothing, so state lives in a registry
    keyed by path (as a disk would). Used to test the harness itself, not as a gate."""

    _disks: ClassVar[dict[str, Any]] = {}

    def __init__(self, path: Path, config: MQConfig, clock: Clock) -> None:
        from model import ReferenceMQ

        key = str(path)
        model = self._disks.get(key)
        if model is None or model.config != config:
            model = ReferenceMQ(config=config, clock=clock)
            self._disks[key] = model
        model._closed = False
        self._model = model

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    def crash(self) -> None:
        self._model._closed = True


def model_factory(
    *, path: Path, config: MQConfig, clock: Clock, faults: FaultHook | None
) -> MessageQueue:
    """The reference model behind the adapter interface (a perfect SUT, for self-tests)."""
    return _CrashableModel(path, config, clock)  # type: ignore[return-value]


def load_factory(spec: str) -> Factory:
    """Resolve ``module:attribute`` to a factory, with an error that says what is wrong."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise BadImplError(f"--impl must look like module:factory, got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # any import failure is the user's input, reported plainly
        raise BadImplError(f"--impl {spec}: cannot import {module_name!r}: {exc}") from None
    target: Any = module
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise BadImplError(
                f"--impl {spec}: {module_name} has no attribute {attribute!r}"
            ) from None
    if not callable(target):
        raise BadImplError(f"--impl {spec}: {attribute!r} is not callable")
    try:
        inspect.signature(target).bind(path=Path("."), config=None, clock=None, faults=None)
    except TypeError as exc:
        raise BadImplError(
            f"--impl {spec}: must accept factory(path=, config=, clock=, faults=): {exc}"
        ) from None
    except ValueError:  # builtins without a signature: trust them
        pass
    return target  # type: ignore[no-any-return]
