"""The stream tests take ``stream_factory``: a callable making a fresh ``StreamFactory``
(streams sharing one new queue). It runs against the model (id ``model``); an
implementation joins by adding its maker to ``FACTORY_MAKERS``.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from model import ReferenceMQ
from model.api import MQConfig
from model.stream import StreamModelFactory
from model.stream.api import StreamFactory

#: A queue with retention off and a constant clock: nothing in a stream test reads the time.
NO_RETENTION = MQConfig(retention_time_s=-1, retention_size_bytes=-1)


def make_model_factory() -> StreamFactory:
    return StreamModelFactory(ReferenceMQ(config=NO_RETENTION, clock=lambda: 0))


FACTORY_MAKERS: dict[str, Callable[[], StreamFactory]] = {"model": make_model_factory}


@pytest.fixture(params=sorted(FACTORY_MAKERS))
def stream_factory(request: pytest.FixtureRequest) -> StreamFactory:
    """A fresh factory over a fresh queue, once per side."""
    return FACTORY_MAKERS[request.param]()
