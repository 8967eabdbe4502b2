"""Deliberately wrong queues as ``--impl MOD:FACTORY`` specs, for the Spark sweep tests:
Spark's Python workers import an implementation by name, like a user's would be."""

from __future__ import annotations

from rmqsim.conformance.adapter import make_model_factory
from tests.wrong_models import FlippedPayload, LostWrite

#: Loses the last message of every batch of two or more (``lost-write``).
lost_write = make_model_factory(LostWrite)
#: Corrupts every 5th payload on delivery (``payload-mismatch``).
flipped_payload = make_model_factory(FlippedPayload)
