"""Every seeded bug, gathered from the mutant modules, sorted by name.

Adding a module of mutants is one line in ``MUTANT_MODULES``; each module exports
``MUTANTS: tuple[Mutant, ...]``.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable

from rmqsim.conformance.mutants import Mutant

__all__ = [
    "MUTANTS",
    "MUTANT_MODULES",
    "UnknownMutantError",
    "gather",
    "select",
]

#: Modules whose ``MUTANTS`` make up the catalogue.
MUTANT_MODULES: tuple[str, ...] = (
    "rmqsim.conformance.mutants.milvus",
    "rmqsim.conformance.mutants.classic",
    "rmqsim.conformance.mutants.crash",
    "rmqsim.conformance.mutants.consumer",
    "rmqsim.conformance.mutants.liveness",
    "rmqsim.conformance.mutants.names",
    "rmqsim.conformance.mutants.blind",
    "rmqsim.conformance.mutants.newcomer",
    "rmqsim.conformance.mutants.rocketmq",
    "rmqsim.conformance.mutants.storage",
    "rmqsim.conformance.mutants.store",
    "rmqsim.conformance.mutants.stream",
)


class UnknownMutantError(ValueError):
    """A mutant name not in the catalogue; the message lists the known ones."""


def gather(modules: Iterable[str] = MUTANT_MODULES) -> tuple[Mutant, ...]:
    """The mutants of ``modules``, sorted by name; names must be unique."""
    found: dict[str, Mutant] = {}
    for module_name in modules:
        for mutant in importlib.import_module(module_name).MUTANTS:
            assert isinstance(mutant, Mutant), (module_name, mutant)
            assert mutant.name not in found, f"mutant name {mutant.name!r} is not unique"
            found[mutant.name] = mutant
    return tuple(found[name] for name in sorted(found))


MUTANTS: tuple[Mutant, ...] = gather()


def select(names: Iterable[str] | None) -> tuple[Mutant, ...]:
    """The mutants called ``names`` (all when None), in catalogue order. A name may also be
    spelled as its factory is (``hwm_not_persisted`` for ``hwm-not-persisted``)."""
    if names is None:
        return MUTANTS
    wanted = [name.strip().replace("_", "-") for name in names if name.strip()]
    known = {mutant.name: mutant for mutant in MUTANTS}
    unknown = [name for name in wanted if name not in known]
    if unknown or not wanted:
        raise UnknownMutantError(
            f"unknown mutant {', '.join(unknown) or '(none given)'}; known: {', '.join(known)}"
        )
    return tuple(mutant for mutant in MUTANTS if mutant.name in wanted)
