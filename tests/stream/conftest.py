"""The stream tests take ``stream_factory`` (a fresh ``StreamFactory``: streams sharing one
new queue) or, when they need several factories or a queue of their own configuration,
``make_stream_factory(config=..., clock=...)``. Both run once per side in
``FACTORY_MAKERS``: the model (``model``), ``impl.stream``'s deterministic streams
(``impl``) and its threaded time-tick stream (``impl-threaded``), both over an
``impl.RocksMQ`` in the test's scratch directory, and the deterministic streams over a
``ReferenceMQ`` (``impl-on-reference``: they run on any queue). An implementation joins by adding an
entry that, given a scratch directory, returns its maker.

``RMQSIM_STREAM_SIDES=name=MOD:FACTORY`` (``;``-separated) replaces the sides by stream
``--impl`` factories (``factory(queue=...) -> StreamFactory``) over RocksMQ: the mutant
tests run this suite against each seeded bug that way.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rmqsim.conformance.adapter import (
    LAYER_FORMS,
    QUEUE_FACTORY_ATTRIBUTE,
    BadImplError,
    load_impl,
)
from rmqsim.impl import RocksMQ
from rmqsim.impl.stream import stream_factory as impl_stream_factory
from rmqsim.impl.stream import threaded_stream_factory
from rmqsim.model import ReferenceMQ
from rmqsim.model.api import Clock, MQConfig
from rmqsim.model.stream import StreamModelFactory
from rmqsim.model.stream.api import StreamFactory

#: Retention off: nothing is removed unless a test configures it.
NO_RETENTION = MQConfig(retention_time_s=-1, retention_size_bytes=-1)

#: ``maker(config=NO_RETENTION, clock=constant 0) -> StreamFactory`` over a fresh queue.
Maker = Callable[..., StreamFactory]


def _zero_clock() -> int:
    return 0


def _model_maker(scratch: Path) -> Maker:
    def make(config: MQConfig = NO_RETENTION, clock: Clock = _zero_clock) -> StreamFactory:
        return StreamModelFactory(ReferenceMQ(config=config, clock=clock))

    return make


def _impl_on_reference_maker(scratch: Path) -> Maker:
    """The implementation's streams over the reference queue: "any MessageQueue"."""

    def make(config: MQConfig = NO_RETENTION, clock: Clock = _zero_clock) -> StreamFactory:
        return impl_stream_factory(queue=ReferenceMQ(config=config, clock=clock))

    return make


def _rocks_maker(stream_factory_fn: Callable[..., StreamFactory]) -> Callable[[Path], Maker]:
    """Streams of ``stream_factory_fn(queue=...)`` over a fresh RocksMQ per factory made,
    or over the queue it names (a stream server's, ``--impl exec:``: its own)."""
    open_queue = getattr(stream_factory_fn, QUEUE_FACTORY_ATTRIBUTE, None)

    def for_scratch(scratch: Path) -> Maker:
        numbers = itertools.count()

        def make(config: MQConfig = NO_RETENTION, clock: Clock = _zero_clock) -> StreamFactory:
            path = scratch / f"queue-{next(numbers)}"
            if open_queue is not None:
                return stream_factory_fn(queue=open_queue(path=path, config=config, clock=clock,
                                                          faults=None))  # fmt: skip
            queue = RocksMQ.open(path, config=config, clock=clock)
            return stream_factory_fn(queue=queue)

        return make

    return for_scratch


def _sides_from_env(spec: str) -> dict[str, Callable[[Path], Maker]]:
    """``name=MOD:FACTORY;...`` as sides over RocksMQ; each ``--impl`` loaded as the
    commands load it (``adapter.load_impl``), and a stream factory."""
    sides: dict[str, Callable[[Path], Maker]] = {}
    for item in filter(None, spec.split(";")):
        name, _, impl = item.partition("=")
        try:
            if not name or not impl:
                raise BadImplError(f"{item!r} is not name=MOD:FACTORY")
            loaded = load_impl(impl)
            if loaded.layer != "stream":
                raise BadImplError(f"--impl {impl} is a {LAYER_FORMS[loaded.layer]} factory, "
                                   "not a stream factory(queue=)")
        except BadImplError as exc:
            raise pytest.UsageError(f"RMQSIM_STREAM_SIDES: {exc}") from None
        sides[name] = _rocks_maker(loaded.factory)
    return sides


#: side -> (scratch directory -> maker); the scratch directory is for sides that need disk.
FACTORY_MAKERS: dict[str, Callable[[Path], Maker]] = {
    "model": _model_maker,
    "impl": _rocks_maker(impl_stream_factory),
    "impl-threaded": _rocks_maker(threaded_stream_factory),
    "impl-on-reference": _impl_on_reference_maker,
}
if os.environ.get("RMQSIM_STREAM_SIDES"):
    FACTORY_MAKERS = _sides_from_env(os.environ["RMQSIM_STREAM_SIDES"])


@pytest.fixture(params=sorted(FACTORY_MAKERS))
def make_stream_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Maker]:
    """The side's maker; every queue it opened is closed after the test."""
    made: list[StreamFactory] = []
    maker = FACTORY_MAKERS[request.param](tmp_path)

    def make(*args: object, **kwargs: object) -> StreamFactory:
        factory = maker(*args, **kwargs)
        made.append(factory)
        return factory

    yield make
    for factory in made:
        close = getattr(factory.mq, "close", None)
        if close is not None:
            close()


@pytest.fixture
def stream_factory(make_stream_factory: Maker) -> StreamFactory:
    """A fresh factory over a fresh queue, once per side."""
    return make_stream_factory()
