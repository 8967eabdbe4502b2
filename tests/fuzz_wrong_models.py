"""Wrong queues the fuzz tests must find and shrink (besides ``tests.wrong_models``).

Served through ``conformance.adapter.make_model_factory`` like the others.
"""

from __future__ import annotations

from typing import Any

from rmqsim.conformance.adapter import make_model_factory
from rmqsim.model import ReferenceMQ
from rmqsim.model.api import ConsumerMessage
from tests.wrong_models import TwoStepProduce


class SeekRedelivers(ReferenceMQ):
    """After a seek, the next poll starts one message early (an iterator positioned with
    seek-for-prev), so it delivers again the message before the one sought: a duplicate
    delivered after a seek. Positions are right again after that poll."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._sought: set[tuple[str, str]] = set()

    def seek(self, topic: str, group: str, msg_id: int) -> None:
        super().seek(topic, group, msg_id)
        self._sought.add((topic, group))

    def consume(self, topic: str, group: str, n: int) -> list[ConsumerMessage]:
        if (topic, group) in self._sought and isinstance(n, int) and n > 0:
            self._sought.discard((topic, group))
            state = self._topics.get(topic)
            position = state.groups.get(group) if state is not None else None
            if isinstance(position, int) and position > 1:
                state.groups[group] = position - 1
        return super().consume(topic, group, n)


#: Factories by ``MOD:FACTORY`` name, for the command-line tests.
seek_redelivers = make_model_factory(SeekRedelivers)
two_step_produce = make_model_factory(TwoStepProduce)
