"""How rmqsim opens the implementation under test (the SUT).

An implementation is a *factory*: ``factory(path=..., config=..., clock=..., faults=...)``
returns a ``model.api.MessageQueue`` that also has ``crash()``. Reopening after a crash or
a close calls the factory again on the same path. ``--impl module:attribute`` names a
user's own factory; ``DEFAULT_IMPL`` is ours (``impl.RocksMQ``); ``BUILTIN_IMPLS`` names
the built-in ones (``--impl commitlog``, ``--impl commitlog-async``).

Crashes in open: the factory itself may call ``faults(point)`` (an implementation that
writes while opening, e.g. to initialise or recover). When that call raises (an injected
crash, a ``BaseException``), the factory must let it propagate *and* release whatever it
already holds (database handle, lock) as a killed process would, without writing more:
rmqsim then opens the path again and checks the state. A factory that keeps its lock
makes that second open fail, reported as the anomaly ``unrecoverable``.
``impl.RocksMQ.open`` does this (``Store.crash()`` on any exception while opening).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeGuard, runtime_checkable

from rmqsim.conformance.bad_impl import BadImplError
from rmqsim.conformance.wire.client import exec_factory, is_exec_impl
from rmqsim.model.api import Clock, MessageQueue, MQConfig

if TYPE_CHECKING:
    from rmqsim.model import ReferenceMQ

__all__ = [
    "BUILTIN_IMPLS",
    "CONSUMER_FACTORY_KEYWORDS",
    "DEFAULT_IMPL",
    "EXTERNAL_DRIVERS",
    "LEGACY_PACKAGES",
    "MODEL_IMPL",
    "QUEUE_FACTORY_KEYWORDS",
    "QUEUE_METHODS",
    "BadImplError",
    "Factory",
    "FaultHook",
    "KeepsStateOutsidePath",
    "checked_queue",
    "external_driver",
    "forget_run_state",
    "is_consumer_factory",
    "load_factory",
    "make_model_factory",
    "model_factory",
    "queue_factory",
    "resolve_impl",
    "rocksmq_factory",
]

DEFAULT_IMPL = "rmqsim.conformance.adapter:rocksmq_factory"
MODEL_IMPL = "rmqsim.conformance.adapter:model_factory"

FaultHook = Callable[[str], None]
#: What a queue factory is called with; and a push consumer factory (docs/CONSUMER.md),
#: which returns a ``model.api.PushConsumerCore`` over ``queue`` with offsets under ``path``.
QUEUE_FACTORY_KEYWORDS = ("path", "config", "clock", "faults")
CONSUMER_FACTORY_KEYWORDS = ("queue", "group", "topic", "config", "clock", "path", "send_hook")


class Factory(Protocol):
    """Opens (or reopens) a queue at ``path``."""

    def __call__(
        self, *, path: Path, config: MQConfig, clock: Clock, faults: FaultHook | None
    ) -> MessageQueue: ...


#: What a queue must have: every method of the contract's protocol, and ``crash()``.
QUEUE_METHODS: tuple[str, ...] = (
    *sorted(
        name for name, value in vars(MessageQueue).items()
        if not name.startswith("_") and callable(value)
    ),
    "crash",
)  # fmt: skip


@runtime_checkable
class KeepsStateOutsidePath(Protocol):
    """A queue that keeps state outside its ``path`` (in memory across reopens, say: the
    model served as a SUT), which rmqsim tells when a run is over so that it can drop that
    state. Optional: a queue whose state lives under ``path`` needs nothing (the run's
    directory is removed). docs/ADAPTER.md "State kept outside path"."""

    def rmqsim_forget(self, path: Path) -> None:
        """The run on ``path`` is over (the queue was crashed): drop what is kept for it."""
        ...


def forget_run_state(queue: object, path: Path) -> None:
    """Tell ``queue`` (the last opened on ``path``) that its run is over, when it wants to
    know (``KeepsStateOutsidePath``)."""
    if isinstance(queue, KeepsStateOutsidePath):
        queue.rmqsim_forget(path)


def checked_queue(queue: object, factory: Factory) -> MessageQueue:
    """``queue``, which ``factory`` just returned, if it has every method a queue needs;
    else ``BadImplError`` naming what it lacks (rather than an ``AttributeError`` deep
    inside a run, which would read as an error of rmqsim's)."""
    if _has_queue_methods(queue):
        return queue
    missing = _missing_methods(queue)
    name = resolve_impl(factory)[0]
    if queue is None:
        raise BadImplError(f"the factory {name} returned None instead of a queue")
    raise BadImplError(
        f"the factory {name} returned a {type(queue).__name__}, which has no "
        f"{', '.join(method + '()' for method in missing)}: a queue needs every method of "
        "rmqsim.model.api.MessageQueue, and crash()"
    )


def _missing_methods(queue: object) -> list[str]:
    return [name for name in QUEUE_METHODS if not callable(getattr(queue, name, None))]


def _has_queue_methods(queue: object) -> TypeGuard[MessageQueue]:
    return not _missing_methods(queue)


def rocksmq_factory(
    *, path: Path, config: MQConfig, clock: Clock, faults: FaultHook | None
) -> MessageQueue:
    """Our implementation: RocksMQ on RocksDB."""
    from rmqsim.impl import RocksMQ

    return RocksMQ.open(path, config=config, clock=clock, faults=faults)


class _ModelDisk:
    """The reference model (or a subclass) behind the adapter interface.

    The model keeps everything in memory, so "the disk" is a registry keyed by path: a
    crash or close keeps the state and reopening the path finds it again. This makes the
    model a perfectly durable SUT, for testing the harness itself, never for gating.
    """

    #: The models by path. ``Any``: each also gets ``faults``, which models do not declare.
    _disks: ClassVar[dict[str, Any]] = {}

    def __init__(
        self,
        model_cls: type[ReferenceMQ],
        path: Path,
        config: MQConfig,
        clock: Clock,
        faults: FaultHook | None,
    ) -> None:
        key = str(path)
        model: Any = self._disks.get(key)
        if model is None or model.config != config or type(model) is not model_cls:
            model = model_cls(config=config, clock=clock)
            self._disks[key] = model
        model.reopen()
        model.faults = faults or (lambda point: None)
        self._model = model

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    def crash(self) -> None:
        """Stop serving, keeping the state (the model loses nothing in a crash)."""
        self._model.close()

    @classmethod
    def rmqsim_forget(cls, path: Path) -> None:
        """Drop the state kept for ``path``: the run is over (``KeepsStateOutsidePath``)."""
        cls._disks.pop(str(path), None)


def make_model_factory(model_cls: type[ReferenceMQ] | None = None) -> Factory:
    """A factory serving ``model_cls`` (default ``ReferenceMQ``) through the adapter: the
    way small, deliberately wrong implementations are written for the harness's tests.
    A subclass may call ``self.faults(point)`` to offer crash points."""
    from rmqsim.model import ReferenceMQ

    cls = model_cls or ReferenceMQ

    def factory(
        *, path: Path, config: MQConfig, clock: Clock, faults: FaultHook | None
    ) -> MessageQueue:
        return _ModelDisk(cls, path, config, clock, faults)

    return factory


#: The reference model as a SUT (a perfect implementation, for self-tests).
model_factory = make_model_factory()


def resolve_impl(impl: str | Factory) -> tuple[str, Factory]:
    """``(name, factory)`` for ``--impl MOD:FACTORY`` or a factory object."""
    if isinstance(impl, str):
        return impl, load_factory(impl)
    name = f"{getattr(impl, '__module__', '?')}:{getattr(impl, '__qualname__', repr(impl))}"
    return name, impl


#: rmqsim's packages as they were named before they lived under ``rmqsim``: an ``--impl``
#: (or a trace's recorded implementation) spelled ``conformance.adapter:rocksmq_factory``
#: still means ``rmqsim.conformance.adapter:rocksmq_factory``, when that module exists.
LEGACY_PACKAGES = frozenset({"model", "impl", "scenarios", "conformance", "reports"})

#: Named built-in queues: ``--impl commitlog`` is the commit-log backend (sync flush).
BUILTIN_IMPLS: dict[str, str] = {
    "rocksmq": DEFAULT_IMPL,
    "commitlog": "rmqsim.impl.commitlog:open_queue",
    "commitlog-async": "rmqsim.impl.commitlog:open_queue_async",
}


#: Named drivers of real systems (``impl/external/``): protocol servers built by their own
#: script, ``name -> (the binary under impl/, the script that builds it)``.
EXTERNAL_DRIVERS: dict[str, tuple[str, str]] = {
    "milvus": ("external/milvus_rocksmq/bin/rmqsim-milvus", "./scripts/build-milvus.sh"),
}


def external_driver(name: str) -> str:
    """``exec:`` of the built driver ``name`` (``EXTERNAL_DRIVERS``), or ``BadImplError``
    naming the script that builds it."""
    binary, script = EXTERNAL_DRIVERS[name]
    import rmqsim.impl

    path = Path(rmqsim.impl.__file__).resolve().parent / binary
    if not os.access(path, os.X_OK):
        raise BadImplError(
            f"--impl {name}: the driver is not built ({path} is missing): run {script} "
            "(it needs Go and a C compiler, and says what it fetches)"
        )
    return "exec:" + shlex.quote(str(path))


def load_factory(spec: str) -> Factory:
    """Resolve ``module:attribute`` (or a name of ``BUILTIN_IMPLS`` or
    ``EXTERNAL_DRIVERS``, or ``exec:COMMAND``) to a factory, with an error that says what
    is wrong."""
    if spec in EXTERNAL_DRIVERS:
        spec = external_driver(spec)
    spec = BUILTIN_IMPLS.get(spec, spec)
    if is_exec_impl(spec):  # a protocol server in another process (docs/PROTOCOL.md)
        return exec_factory(spec)
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise BadImplError(f"--impl must look like module:factory, got {spec!r}")
    try:
        module = _import_module(module_name)
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
        signature = inspect.signature(target)
    except ValueError:  # builtins without a signature: trust them
        return target
    for keywords in (QUEUE_FACTORY_KEYWORDS, CONSUMER_FACTORY_KEYWORDS):
        try:
            signature.bind(**dict.fromkeys(keywords))
        except TypeError:
            continue
        return target
    raise BadImplError(
        f"--impl {spec}: must accept factory({'=, '.join(QUEUE_FACTORY_KEYWORDS)}=) (a queue) "
        f"or factory({'=, '.join(CONSUMER_FACTORY_KEYWORDS)}=) (a push consumer core)"
    )


def _import_module(module_name: str) -> Any:
    """Import ``module_name``; a module that is not found is also looked for in the
    current directory, as ``python -m`` would find it.

    ``rmqsim`` and ``pytest`` run as console scripts, whose ``sys.path`` starts with their
    own directory, not the current one: a user's ``my_adapter.py`` next to them would not
    be found. The current directory goes *last* on the path, so it can never hide an
    installed package, and only when the plain import did not find the module.
    """
    legacy = f"rmqsim.{module_name}"
    if module_name.partition(".")[0] in LEGACY_PACKAGES and _module_exists(legacy):
        return importlib.import_module(legacy)
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        top_level = module_name.partition(".")[0]
        cwd = os.getcwd()
        if exc.name != top_level or cwd in sys.path or "" in sys.path:
            raise
        sys.path.append(cwd)
        return importlib.import_module(module_name)


def _module_exists(module_name: str) -> bool:
    """Whether ``module_name`` can be imported (its parent packages are imported to know)."""
    try:
        return importlib.util.find_spec(module_name) is not None
    except ModuleNotFoundError:
        return False


def queue_factory(impl: str | Factory, needed_by: str) -> tuple[str, Factory]:
    """``resolve_impl`` for what only a queue can run (``needed_by``: replaying a queue
    trace, fuzzing, a crash sweep): a push consumer factory is refused with a clear
    ``BadImplError`` instead of failing at its first call."""
    name, factory = resolve_impl(impl)
    if is_consumer_factory(factory):
        raise BadImplError(
            f"--impl {name} is a push consumer factory; {needed_by} needs a queue factory "
            f"factory({'=, '.join(QUEUE_FACTORY_KEYWORDS)}=)"
        )
    return name, factory


def is_consumer_factory(factory: object) -> bool:
    """True for a push consumer factory (``CONSUMER_FACTORY_KEYWORDS``), False for a queue
    factory: ``--impl`` may name either layer, and ours stands in for the other one. A
    factory that accepts both (``**kwargs``) is a queue factory."""
    if not callable(factory):
        return False
    try:
        signature = inspect.signature(factory)
        signature.bind(**dict.fromkeys(CONSUMER_FACTORY_KEYWORDS))
    except (TypeError, ValueError):
        return False
    try:
        signature.bind(**dict.fromkeys(QUEUE_FACTORY_KEYWORDS))
    except TypeError:
        return True
    return False
