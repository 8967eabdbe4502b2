"""What every mutant module shares: turning a wrong ``RocksMQ`` subclass into a factory.

A mutant is a subclass of ``impl.RocksMQ`` (or of its ``Store``) that overrides one method
or one seam; nothing is patched globally, so a mutant and the real implementation can be
opened one after the other (or side by side) in one process.
"""

from __future__ import annotations

from pathlib import Path

from rmqsim.conformance.adapter import Factory, FaultHook
from rmqsim.impl import RocksMQ
from rmqsim.model.api import Clock, MessageQueue, MQConfig

__all__ = [
    "factory_of",
]


def factory_of(cls: type[RocksMQ]) -> Factory:
    """The ``--impl`` factory that opens ``cls`` exactly as ``rocksmq_factory`` opens
    ``RocksMQ``; named after the class so that reports say which mutant ran."""
    assert issubclass(cls, RocksMQ), cls

    def factory(
        *, path: Path, config: MQConfig, clock: Clock, faults: FaultHook | None
    ) -> MessageQueue:
        return cls.open(path, config=config, clock=clock, faults=faults)

    factory.__doc__ = cls.__doc__
    factory.__qualname__ = factory.__name__ = f"open_{cls.__name__}"
    return factory
