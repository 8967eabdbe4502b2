"""How rmqsim opens the implementation under test (the SUT).

An implementation is a *factory*: ``factory(path=..., config=..., clock=..., faults=...)``
returns a ``model.api.MessageQueue`` that also has ``crash()``. Reopening after a crash or
a close calls the factory again on the same path. ``--impl module:attribute`` names a
user's own factory; ``DEFAULT_IMPL`` is ours (``impl.RocksMQ``); ``BUILTIN_IMPLS`` names
the built-in ones (``--impl commitlog``, ``--impl commitlog-async``, ``--impl stream``).

Every layer comes in the same way: ``load_impl`` loads an ``--impl`` (or takes a factory
object) and sorts it into its layer (``LAYER_KEYWORDS``: queue, storage backend, push
consumer, stream) by ``classify_factory``'s rule; every command goes through it, and it is
the one place where another kind of ``--impl`` string would be dispatched.

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
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeGuard, runtime_checkable

from rmqsim.conformance.bad_impl import BadImplError
from rmqsim.conformance.wire.client import (  # the attribute serves the stream layer
    QUEUE_FACTORY_ATTRIBUTE,
    exec_factory,
    is_exec_impl,
)
from rmqsim.model.api import Clock, MessageQueue, MQConfig

if TYPE_CHECKING:
    from rmqsim.model import ReferenceMQ

__all__ = [
    "BASE_LAYERS",
    "BUILTIN_IMPLS",
    "CONSUMER_FACTORY_KEYWORDS",
    "DEFAULT_IMPL",
    "EXTERNAL_DRIVERS",
    "FLUSH_ATTRIBUTE",
    "FLUSH_PROMISES",
    "LAYER_ATTRIBUTE",
    "LAYER_FORMS",
    "LAYER_KEYWORDS",
    "LEGACY_PACKAGES",
    "MODEL_IMPL",
    "QUEUE_FACTORY_ATTRIBUTE",
    "QUEUE_FACTORY_KEYWORDS",
    "QUEUE_LAYERS",
    "QUEUE_METHODS",
    "BadImplError",
    "ExternalDriver",
    "Factory",
    "FaultHook",
    "KeepsStateOutsidePath",
    "LoadedImpl",
    "NoFormError",
    "accepted_forms",
    "builtin_impl_modules",
    "checked_queue",
    "classify_factory",
    "external_driver",
    "forget_run_state",
    "impl_name",
    "is_consumer_factory",
    "load_factory",
    "load_impl",
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
#: What each layer's factory is called with (``load_impl``): a storage backend is a queue
#: factory that also takes ``fs=`` (the power-loss sweep's disk); a stream factory takes
#: the queue its streams run over and returns a ``model.stream.api.StreamFactory``; a
#: message store factory (the storage layer, docs/STORAGE.md) returns a
#: ``model.store.api.MessageStore`` (it may also take ``fs=``, for in-process power loss).
LAYER_KEYWORDS: dict[str, tuple[str, ...]] = {
    "queue": QUEUE_FACTORY_KEYWORDS,
    "storage": (*QUEUE_FACTORY_KEYWORDS, "fs"),
    "consumer": CONSUMER_FACTORY_KEYWORDS,
    "stream": ("queue",),
    "store": ("path", "store_config", "clock", "faults"),
}
#: Each layer's form as messages name it.
LAYER_FORMS: dict[str, str] = {
    "queue": "queue",
    "storage": "storage backend",
    "consumer": "push consumer",
    "stream": "stream",
    "store": "message store",
}
#: The layers a signature is matched against (a storage backend is a queue that takes fs=).
BASE_LAYERS = ("queue", "consumer", "stream", "store")
#: The layers that are queues (what a queue profile, a fuzz or a crash sweep runs).
QUEUE_LAYERS = ("queue", "storage")
#: The attribute a factory may declare its layer with (``factory.rmqsim_layer = "stream"``).
LAYER_ATTRIBUTE = "rmqsim_layer"
#: The attribute a storage backend declares its durability promise with.
FLUSH_ATTRIBUTE = "rmqsim_flush"
#: The durability promises a storage backend may make (docs/STORAGE.md).
FLUSH_PROMISES = ("sync", "async")


class Factory(Protocol):
    """Opens (or reopens) a queue at ``path``."""

    def __call__(
        self, *, path: Path, config: MQConfig, clock: Clock, faults: FaultHook | None
    ) -> MessageQueue: ...


class NoFormError(BadImplError):
    """``--impl`` names a callable, ``factory``, that is of none of the forms of
    ``LAYER_KEYWORDS`` (or declares one wrongly); the message says why."""

    def __init__(self, message: str, factory: Any) -> None:
        super().__init__(message)
        self.factory = factory


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
    name = impl_name(factory)
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
    """``(name, factory)`` for ``--impl`` or a factory object, loaded as ``load_impl``
    loads it but not sorted into a form: a layer defined elsewhere (``conformance.layer``)
    may take factories of its own; the built-in layers go through ``load_impl``."""
    if not isinstance(impl, str):
        return impl_name(impl), impl
    try:
        loaded = load_impl(impl)
    except NoFormError as exc:  # loaded, but of no built-in form
        return impl, exc.factory
    return loaded.name, loaded.factory


#: rmqsim's packages as they were named before they lived under ``rmqsim``: an ``--impl``
#: (or a trace's recorded implementation) spelled ``conformance.adapter:rocksmq_factory``
#: still means ``rmqsim.conformance.adapter:rocksmq_factory``, when that module exists.
LEGACY_PACKAGES = frozenset({"model", "impl", "scenarios", "conformance", "reports"})

#: Named built-in implementations: ``--impl commitlog`` is the commit-log backend (sync
#: flush), ``--impl stream`` our deterministic streams.
BUILTIN_IMPLS: dict[str, str] = {
    "rocksmq": DEFAULT_IMPL,
    "commitlog": "rmqsim.impl.commitlog:open_queue",
    "commitlog-async": "rmqsim.impl.commitlog:open_queue_async",
    "stream": "rmqsim.impl.stream:stream_factory",
    "stream-threaded": "rmqsim.impl.stream:threaded_stream_factory",
    "commitlog-store": "rmqsim.impl.store:open_store",
}


def builtin_impl_modules() -> list[str]:
    """The modules of the built-in Python implementations: what a fork server preloads
    (``conformance.wire.child.preload_forked``, the gate's worker pool), so that a forked
    server of any of them costs a fork whichever implementation started the fork server
    (a process has one, and its preload is what the first start asked for)."""
    return sorted({target.partition(":")[0] for target in BUILTIN_IMPLS.values()})


@dataclass(frozen=True, slots=True)
class ExternalDriver:
    """A named driver of a real system (``impl/external/``): the command under ``impl/``
    that serves the protocol, the file its build leaves (under ``impl/``: absent, the driver
    is not built), the script that builds it and what that needs."""

    command: str
    built: str
    script: str
    needs: str


#: Named drivers of real systems, by ``--impl`` name.
EXTERNAL_DRIVERS: dict[str, ExternalDriver] = {
    "milvus": ExternalDriver("external/milvus_rocksmq/bin/rmqsim-milvus",
                             "external/milvus_rocksmq/bin/rmqsim-milvus",
                             "./scripts/build-milvus.sh", "Go and a C compiler"),
    "rocketmq-store": ExternalDriver(
        "external/rocketmq_store/rocketmq-store-server",
        "external/rocketmq_store/target/rmqsim-rocketmq-store.jar",
        "./scripts/build-rocketmq.sh", "Java 17 and Maven"),
}


def external_driver(name: str) -> str:
    """``exec:`` of the built driver ``name`` (``EXTERNAL_DRIVERS``), or ``BadImplError``
    naming the script that builds it."""
    driver = EXTERNAL_DRIVERS[name]
    import rmqsim.impl

    root = Path(rmqsim.impl.__file__).resolve().parent
    built, command = root / driver.built, root / driver.command
    if not built.exists() or not os.access(command, os.X_OK):
        raise BadImplError(
            f"--impl {name}: the driver is not built ({built} is missing): run "
            f"{driver.script} (it needs {driver.needs}, and says what it fetches)"
        )
    return "exec:" + shlex.quote(str(command))


@dataclass(frozen=True, slots=True)
class LoadedImpl:
    """An implementation, loaded and checked: ``name`` (what ``--impl`` said, or
    ``module:qualname`` of an object), its ``factory``, its ``layer`` (a key of
    ``LAYER_KEYWORDS``) and, for a storage backend, its durability promise ``flush``."""

    name: str
    factory: Any
    layer: str
    flush: str | None = None


def load_impl(impl: str | Callable[..., Any]) -> LoadedImpl:
    """The one way in: ``--impl`` (``MODULE:ATTR[.ATTR...]``, a ``BUILTIN_IMPLS`` or
    ``EXTERNAL_DRIVERS`` name, or ``exec:COMMAND``) or a factory object, loaded and sorted
    into its layer by ``classify_factory``; ``BadImplError`` (one line naming every accepted
    form) when it is none of them."""
    if not isinstance(impl, str):
        return classify_factory(impl_name(impl), impl)
    # The one place an --impl string becomes a factory: a named driver of a real system or
    # ``exec:COMMAND`` is a protocol server in another process (docs/PROTOCOL.md), whose
    # factory is a queue factory; anything else is MODULE:ATTRIBUTE.
    spec = external_driver(impl) if impl in EXTERNAL_DRIVERS else BUILTIN_IMPLS.get(impl, impl)
    if is_exec_impl(spec):
        return classify_factory(impl, exec_factory(spec))
    return classify_factory(impl, _load_attribute(impl, spec))


def impl_name(factory: object) -> str:
    """The name of a factory object: ``module:qualname``."""
    qualname = getattr(factory, "__qualname__", repr(factory))
    return f"{getattr(factory, '__module__', '?')}:{qualname}"


def load_factory(spec: str) -> Factory:
    """The factory ``spec`` names, of any layer (``load_impl``)."""
    factory: Factory = load_impl(spec).factory
    return factory


def _load_attribute(name: str, spec: str) -> Any:
    """The object ``spec`` (``module:attribute``, the attribute maybe dotted) names."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise BadImplError(f"--impl must be module:factory, exec:COMMAND or one of "
                           f"{', '.join([*BUILTIN_IMPLS, *EXTERNAL_DRIVERS])}, "
                           f"got {name!r}")
    try:
        module = _import_module(module_name)
    except (Exception, SystemExit) as exc:  # any import failure is the user's input
        why = f"it called sys.exit({exc.code!r})" if isinstance(exc, SystemExit) else exc
        raise BadImplError(f"--impl {name}: cannot import {module_name!r}: {why}") from None
    target: Any = module
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise BadImplError(
                f"--impl {name}: {module_name} has no attribute {attribute!r}"
            ) from None
    if not callable(target):
        raise BadImplError(f"--impl {name}: {attribute!r} is not callable")
    return target


def accepted_forms() -> str:
    """Every form ``--impl`` may take, as the refusal names them."""
    forms = [f"a {LAYER_FORMS[layer]} factory({_keywords(layer)})" for layer in LAYER_FORMS]
    return ", ".join(forms[:-1]) + " or " + forms[-1]


def _keywords(layer: str) -> str:
    return ", ".join(f"{keyword}=" for keyword in LAYER_KEYWORDS[layer])


def _refuse(name: str, problem: str) -> BadImplError:
    return BadImplError(
        f"--impl {name}: {problem}; --impl takes {accepted_forms()}, which may declare "
        f"its form as factory.{LAYER_ATTRIBUTE} (docs/ADAPTER.md)"
    )


def classify_factory(name: str, factory: Any) -> LoadedImpl:
    """``factory``'s layer, by this rule (docs/ADAPTER.md "Which layer"):

    1. a declared ``factory.rmqsim_layer`` (a key of ``LAYER_KEYWORDS``) decides, when the
       signature accepts that layer's keywords;
    2. else the signature must name its keywords (no ``**kwargs``) and accept those of
       exactly one form: queue (a storage backend when it also takes ``fs=``), push
       consumer or stream. Accepting two forms is ambiguous and refused, as is a
       signature that cannot be read.

    A storage backend's ``flush`` is its declared ``rmqsim_flush``, else ``sync``."""
    if not callable(factory):
        raise _refuse(name, f"{type(factory).__name__} is not callable")
    declared = getattr(factory, LAYER_ATTRIBUTE, None)
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        signature = None
    try:
        if declared is not None:
            layer = _declared_layer(name, declared, signature)
        else:
            layer = _layer_by_signature(name, signature)
        return LoadedImpl(name, factory, layer, _flush_of(name, factory, layer))
    except BadImplError as exc:
        raise NoFormError(str(exc), factory) from None


def _declared_layer(name: str, declared: object, signature: inspect.Signature | None) -> str:
    if declared not in LAYER_KEYWORDS:
        raise _refuse(name, f"{LAYER_ATTRIBUTE} = {declared!r} is not one of "
                            f"{', '.join(map(repr, LAYER_KEYWORDS))}")  # fmt: skip
    layer = str(declared)
    if signature is not None and not _binds(signature, LAYER_KEYWORDS[layer]):
        raise _refuse(name, f"it declares {LAYER_ATTRIBUTE} = {layer!r} but "
                            f"{_lacks(signature, LAYER_KEYWORDS[layer])}")  # fmt: skip
    return layer


def _layer_by_signature(name: str, signature: inspect.Signature | None) -> str:
    if signature is None:
        raise _refuse(name, "its signature cannot be read: declare which form it is")
    params = signature.parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        raise _refuse(name, f"factory{signature} hides what it takes (**): name its "
                            f"keywords, or declare its form ({LAYER_ATTRIBUTE} = ...)")
    matches = [layer for layer in BASE_LAYERS if _binds(signature, LAYER_KEYWORDS[layer])]
    if len(matches) > 1:
        both = " and ".join(f"a {LAYER_FORMS[layer]} factory" for layer in matches)
        chosen = " or ".join(repr(layer) for layer in matches)
        raise _refuse(name, f"it accepts the keywords of both {both}: declare which it is "
                            f"({LAYER_ATTRIBUTE} = {chosen})")
    if not matches:
        closest = min(BASE_LAYERS, key=lambda layer: _distance(signature, layer))
        raise _refuse(name, f"factory{signature} is no form: as a {LAYER_FORMS[closest]} "
                            f"factory it {_lacks(signature, LAYER_KEYWORDS[closest])}")
    if matches == ["queue"] and _binds(signature, LAYER_KEYWORDS["storage"]):
        return "storage"
    return matches[0]


def _flush_of(name: str, factory: Any, layer: str) -> str | None:
    declared = getattr(factory, FLUSH_ATTRIBUTE, None)
    if layer != "storage":
        if declared is not None:
            raise _refuse(name, f"it declares {FLUSH_ATTRIBUTE}, a storage backend's promise, "
                                f"but it is a {LAYER_FORMS[layer]} factory (no fs=)")
        return None
    if declared is None:
        return "sync"
    if declared not in FLUSH_PROMISES:
        raise _refuse(name, f"{FLUSH_ATTRIBUTE} = {declared!r} is not one of "
                            f"{', '.join(map(repr, FLUSH_PROMISES))}")  # fmt: skip
    return str(declared)


def _binds(signature: inspect.Signature, keywords: tuple[str, ...]) -> bool:
    try:
        signature.bind(**dict.fromkeys(keywords))
    except TypeError:
        return False
    return True


def _missing_and_extra(
    signature: inspect.Signature, keywords: tuple[str, ...]
) -> tuple[list[str], list[str]]:
    """The ``keywords`` the signature does not take, and what it requires beyond them."""
    params = signature.parameters
    keyword_kinds = (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    missing = [k for k in keywords if k not in params or params[k].kind not in keyword_kinds]
    extra = [
        p.name for p in params.values()
        if p.name not in keywords and p.default is inspect.Parameter.empty
        and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    ]  # fmt: skip
    return missing, extra


def _distance(signature: inspect.Signature, layer: str) -> int:
    missing, extra = _missing_and_extra(signature, LAYER_KEYWORDS[layer])
    return len(missing) + len(extra)


def _lacks(signature: inspect.Signature, keywords: tuple[str, ...]) -> str:
    """What keeps ``signature`` from accepting ``keywords``, in words."""
    missing, extra = _missing_and_extra(signature, keywords)
    parts = []
    if missing:
        parts.append(f"lacks {', '.join(k + '=' for k in missing)}")
    if extra:
        parts.append(f"also requires {', '.join(extra)}")
    return " and ".join(parts) or "cannot be called with them"


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
    trace, fuzzing, a crash sweep): a factory of another layer is refused with a clear
    ``BadImplError`` instead of failing at its first call."""
    loaded = load_impl(impl)
    if loaded.layer not in QUEUE_LAYERS:
        raise BadImplError(
            f"--impl {loaded.name} is a {LAYER_FORMS[loaded.layer]} factory; {needed_by} "
            f"needs a queue factory factory({_keywords('queue')})"
        )
    return loaded.name, loaded.factory


def is_consumer_factory(factory: object) -> bool:
    """True for a push consumer factory (``load_impl``'s layer ``consumer``), False for
    anything else (a factory of another layer, or no factory at all)."""
    try:
        return load_impl(factory).layer == "consumer"  # type: ignore[arg-type]
    except BadImplError:
        return False
