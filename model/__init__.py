"""The reference model: SPEC.md in executable form, pure Python, no I/O.

``model.api`` is the contract every implementation imports; ``ReferenceMQ`` is the oracle.
"""

from rmqsim.model.reference import ReferenceMQ

__all__ = ["ReferenceMQ"]
