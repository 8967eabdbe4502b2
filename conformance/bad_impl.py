"""The error of an ``--impl`` that names no usable implementation, in a module of its own so
that every way in (``conformance.adapter`` for Python factories, ``conformance.wire`` for
another process) raises the same one without importing each other."""

from __future__ import annotations

__all__ = ["BadImplError"]


class BadImplError(Exception):
    """``--impl`` does not name a usable factory; the message says why."""
