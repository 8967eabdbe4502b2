"""The stream tests take ``stream_factory`` (a fresh ``StreamFactory``: streams sharing one
new queue) or, when they need several factories or a queue of their own configuration,
``make_stream_factory(config=..., clock=...)``. Both run once per side in
``FACTORY_MAKERS``: the model (id ``model``) today; an implementation joins by adding an
entry that, given a scratch directory, returns its maker.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

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


#: side -> (scratch directory -> maker); the scratch directory is for sides that need disk.
FACTORY_MAKERS: dict[str, Callable[[Path], Maker]] = {"model": _model_maker}


@pytest.fixture(params=sorted(FACTORY_MAKERS))
def make_stream_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Maker:
    return FACTORY_MAKERS[request.param](tmp_path)


@pytest.fixture
def stream_factory(make_stream_factory: Maker) -> StreamFactory:
    """A fresh factory over a fresh queue, once per side."""
    return make_stream_factory()
