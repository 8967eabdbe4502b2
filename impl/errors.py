"""Storage error types of ``impl``: what can go wrong below the queue's contract.

The contract's errors (``model.api``: NotServing, InvalidArgument, TopicNotFound, ...) say
what the *caller* did wrong. These say what is wrong with the *database directory* or the
disk. They all derive from ``StorageError``, itself an ``MQError`` (``kind = "Storage"``),
so a caller that catches ``MQError`` catches everything the queue raises.

RocksDB reports every problem as a plain ``Exception`` carrying its own text. ``impl``
never lets that escape alone: it raises one of these with a sentence that says what
happened and what to do, and keeps RocksDB's text at the end (and as ``__cause__``).
"""

from __future__ import annotations

from rmqsim.model.api import MQError

__all__ = [
    "CorruptDatabaseError",
    "DatabaseLockedError",
    "ForeignDatabaseError",
    "FormatVersionError",
    "NotADatabaseError",
    "StorageError",
]


class StorageError(MQError):
    """The database could not be opened, read or written (disk full, I/O error, ...)."""

    kind = "Storage"


class NotADatabaseError(StorageError):
    """The path is a file, or a non-empty directory that holds no rmqsim database."""

    kind = "NotADatabase"


class ForeignDatabaseError(NotADatabaseError):
    """The directory holds a RocksDB database that rmqsim did not create (other column
    families, no rmqsim lock file, pickled rocksdict mode, or no rmqsim format record)."""

    kind = "ForeignDatabase"


class DatabaseLockedError(StorageError):
    """Another RocksMQ instance (in this process or another) has the database open."""

    kind = "DatabaseLocked"


class CorruptDatabaseError(StorageError):
    """The database is damaged: RocksDB reports corruption, or a record breaks the layout."""

    kind = "CorruptDatabase"


class FormatVersionError(StorageError):
    """The database was written by a newer (or unknown) version of the rmqsim layout."""

    kind = "FormatVersion"
