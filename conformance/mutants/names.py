"""Name-identity bugs seeded into ``impl.RocksMQ``: a queue that takes two different names
for one. SPEC names are exact strings ("Names and values"): ``T`` and ``t`` are two topics,
and so are ``ü`` written as U+00FC (NFC) and as ``u`` + U+0308 (NFD).

Each mutant looks names up through a *fold* (case folding, Unicode NFC normalization) and
keeps the spelling it met first, as a case-insensitive (or normalization-insensitive) but
case-preserving store does: a key collation, a file system, a lower-cased lookup key. One
name alone behaves exactly as it should; only two names with one fold tell it apart, so
only name pools that hold such pairs (``scenarios.names.FOLD_PAIRS``) can kill it.
Load with ``--impl conformance.mutants.names:<factory>``.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

from rmqsim.conformance.mutants import Mutant
from rmqsim.conformance.mutants.base import factory_of
from rmqsim.impl import RocksMQ
from rmqsim.model.api import ConsumerMessage, ProducerMessage

__all__ = [
    "MUTANTS",
    "CaseInsensitiveNames",
    "NfcInsensitiveNames",
    "case_insensitive_names",
    "nfc_insensitive_names",
]


class _FoldedNames(RocksMQ):
    """RocksMQ whose every operation first replaces a topic (group) name by a live topic
    (a group of that topic) with the same fold, if there is one."""

    @staticmethod
    def _fold(name: str) -> str:
        raise NotImplementedError

    def _topic(self, topic: str) -> str:
        if not isinstance(topic, str):
            return topic  # the real validation names the bad argument
        folded = self._fold(topic)
        return next((name for name in self._topics if self._fold(name) == folded), topic)

    def _group(self, topic: str, group: str) -> str:
        cached = self._topics.get(topic)
        if cached is None or not isinstance(group, str):
            return group
        folded = self._fold(group)
        return next((name for name in cached.groups if self._fold(name) == folded), group)

    def _pair(self, topic: str, group: str) -> tuple[str, str]:
        topic = self._topic(topic)
        return topic, self._group(topic, group)

    def create_topic(self, topic: str) -> None:
        super().create_topic(self._topic(topic))

    def destroy_topic(self, topic: str) -> None:
        super().destroy_topic(self._topic(topic))

    def create_consumer_group(self, topic: str, group: str) -> None:
        super().create_consumer_group(*self._pair(topic, group))

    def destroy_consumer_group(self, topic: str, group: str) -> None:
        super().destroy_consumer_group(*self._pair(topic, group))

    def exist_consumer_group(self, topic: str, group: str) -> bool:
        return super().exist_consumer_group(*self._pair(topic, group))

    def produce(self, topic: str, messages: Sequence[ProducerMessage]) -> list[int]:
        return super().produce(self._topic(topic), messages)

    def consume(self, topic: str, group: str, n: int) -> list[ConsumerMessage]:
        return super().consume(*self._pair(topic, group), n)

    def seek(self, topic: str, group: str, msg_id: int) -> None:
        super().seek(*self._pair(topic, group), msg_id)

    def seek_to_latest(self, topic: str, group: str) -> None:
        super().seek_to_latest(*self._pair(topic, group))

    def get_latest_msg(self, topic: str) -> int:
        return super().get_latest_msg(self._topic(topic))


class CaseInsensitiveNames(_FoldedNames):
    """Bug class: name identity. Topic and group names are compared case-insensitively
    (``str.casefold``), keeping the first spelling: with ``t`` live, ``create_topic("T")``
    does nothing and ``produce("T", ...)`` appends to ``t`` instead of failing."""

    @staticmethod
    def _fold(name: str) -> str:
        return name.casefold()


class NfcInsensitiveNames(_FoldedNames):
    """Bug class: name identity. Topic and group names are compared after Unicode NFC
    normalization, keeping the first spelling: ``"ü"`` (U+00FC) and ``"u\\u0308"`` (``u`` +
    combining diaeresis) are taken for one topic (or group)."""

    @staticmethod
    def _fold(name: str) -> str:
        return unicodedata.normalize("NFC", name)


case_insensitive_names = factory_of(CaseInsensitiveNames)
nfc_insensitive_names = factory_of(NfcInsensitiveNames)

_MODULE = __name__
MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "case-insensitive-names",
        "names",
        "topic and group names differing only by case are taken for one name",
        f"{_MODULE}:case_insensitive_names",
    ),
    Mutant(
        "nfc-insensitive-names",
        "names",
        "names differing only by Unicode normalization (NFC vs NFD) are taken for one",
        f"{_MODULE}:nfc_insensitive_names",
    ),
)
