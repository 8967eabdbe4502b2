"""The real implementation: RocksMQ on one RocksDB database through rocksdict.

``RocksMQ.open(path, config=MQConfig(), clock=None, faults=None, *, retention_interval_s=None,
sync_writes=False)`` meets ``model.api.MessageQueue`` as SPEC.md says, plus ``close()`` and
``crash()``. It imports only ``model.api`` from the rest of the project.

Modules, each holding one thing:

- ``keys``      key layout: tag bytes, big-endian ids, incarnations;
- ``codec``     value encodings (versioned, no pickle): messages with properties, records;
- ``storage``   the RocksDB database: directory checks, lock file, atomic batches, reads,
                close and crash, RocksDB error mapping;
- ``loader``    reading the whole database back, with its invariants checked;
- ``retention`` which acked pages a retention pass deletes (pure);
- ``faults``    ``FAULT_POINTS`` and the hook type;
- ``integrity`` the directory's integrity record (``rmqsim.integrity``): what a clean
                close or an open left there, checked before RocksDB opens it again;
- ``errors``    the storage error types;
- ``rocksmq``   ``RocksMQ``: operations, caches, locks, the background retention thread.

Layout 2 (details in ``keys`` and ``codec``): one column family, keys tagged by their
first byte. ``m | incarnation u64 BE | id u64 BE`` maps to ``tag | [properties] |
payload``; below the messages sit the format record, the incarnation counter, per topic a
record (incarnation, open page bytes, trim id), per *name* the id high-water mark (kept
across destroy), group positions and closed pages keyed by incarnation. Each topic gets a
fresh incarnation when created, so destroy is a ``delete_range`` per record kind over
``[inc, inc+1)`` and never touches another topic, and ids continue from the name's
high-water mark.

Atomicity and durability. Every operation computes its whole effect first and writes it
as one ``WriteBatch`` through the WAL: produce (messages, page records, topic record, high
-water mark), consume/seek/seek_to_latest (position and newly acked pages), create/destroy
of groups (the group and acks), retention (one batch for *all* topics: page and message
ranges and topic records), destroy_topic (everything of the incarnation). Caches change
only after the batch is written. A crash leaves the state before or after an operation.
Writes are not fsynced by default (``sync_writes=False``): safe against process crashes,
not power loss.

Crash points (``FAULT_POINTS``): ``<op>.before_write`` and ``<op>.after_write`` for every
writing operation, ``open.*`` when a new database is initialised, ``close.*`` around the
final flush. ``crash()`` stops RocksDB's background work (so dropping the handles flushes
nothing) and releases every handle and the lock, writing nothing more.

Bad input. ``open`` refuses, before RocksDB opens it read-write (so nothing in the
directory changes): a path that is a file or a non-empty directory without a database
(``NotADatabaseError``), a RocksDB database it did not create (``ForeignDatabaseError``), a
database another instance holds (``DatabaseLockedError``, via ``flock`` on
``rmqsim.lock``), a damaged or unreadable database (``CorruptDatabaseError`` naming the
damaged file: see ``storage``), layout 1 (``FormatVersionError``). Intact files whose
records are another layout version (``FormatVersionError``) or break the layout
(``CorruptDatabaseError`` naming the record) are refused after RocksDB's open: RocksDB has
then written a new MANIFEST and LOG, and kept every record. All derive from
``StorageError``, an ``MQError``.
"""

from rmqsim.impl.errors import (
    CorruptDatabaseError,
    DatabaseLockedError,
    ForeignDatabaseError,
    FormatVersionError,
    NotADatabaseError,
    StorageError,
)
from rmqsim.impl.faults import FAULT_POINTS, FaultHook
from rmqsim.impl.rocksmq import RocksMQ

__all__ = [
    "FAULT_POINTS",
    "CorruptDatabaseError",
    "DatabaseLockedError",
    "FaultHook",
    "ForeignDatabaseError",
    "FormatVersionError",
    "NotADatabaseError",
    "RocksMQ",
    "StorageError",
]
