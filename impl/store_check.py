"""Checking and reading a closed (or crashed) store without changing it: ``rmqsim store
check`` and ``rmqsim store dump``, for both backends, told apart by their directories.

- ``impl.RocksMQ``'s RocksDB directory (``CURRENT``, ``rmqsim.lock``, ``rmqsim.integrity``):
  ``storage.inspect`` checks it as an open does (the integrity record, every recorded
  file's bytes, RocksDB's read-only recovery of the MANIFEST and the WAL) and opens it
  read-only on a view of the directory; then every metadata and message record is read
  and checked (``loader.read_database``: the layout's invariants, each topic's ids exactly
  ``(trim_id, last_id]``; RocksDB checks every block's checksum as it reads it). RocksDB's
  recovery keeps everything or refuses: an incomplete last WAL record (an operation cut by
  a crash) is dropped silently, and said so when the store was not closed.
- the commit-log store (``rmqsim-commitlog``): recovery runs on an
  ``OverlayFileSystem`` (reads from the disk, writes to memory), so it says exactly what
  it would keep and drop (``recovery_report``) or why it would refuse the store; then
  every record of the whole log is checked (recovery checks only those after the
  checkpoint), and every retained message is read through its consume-queue entry, its
  record's CRC checked.

Neither writes a byte under the store's directory, nor takes its lock: a store open in
another process may change under the check.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from dataclasses import dataclass, field

from rmqsim.impl import storage
from rmqsim.impl.commitlog import records
from rmqsim.impl.commitlog.fs import OverlayFileSystem
from rmqsim.impl.commitlog.recovery import DEFAULT_GEOMETRY, FORMAT_FILE, OpenStore, open_store
from rmqsim.impl.commitlog.state import TopicMeta
from rmqsim.impl.errors import CorruptDatabaseError, NotADatabaseError, StorageError
from rmqsim.impl.integrity import RECORD_FILE_NAME, STATE_CLOSED, read_record
from rmqsim.impl.loader import read_database
from rmqsim.model.api import ConsumerMessage, State, TopicState

__all__ = [
    "BACKEND_COMMITLOG",
    "BACKEND_ROCKSMQ",
    "StoreCheck",
    "check_store",
    "detect_backend",
    "iter_dump",
]

BACKEND_ROCKSMQ = "rocksmq"
BACKEND_COMMITLOG = "commitlog"
#: How many damaged messages a check names one by one (then it counts the rest).
MAX_NAMED_PROBLEMS = 20
_READ_CHUNK_ENTRIES = 1024


@dataclass(slots=True)
class StoreCheck:
    """What a check found. ``damage``: what is wrong (refusals, damaged records and
    entries); ``dropped``: what a recovery would drop or repair; ``state``: what it would
    keep (None when it would refuse the store)."""

    backend: str
    path: str
    damage: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    state: State | None = None

    @property
    def clean(self) -> bool:
        return not self.damage and not self.dropped


def detect_backend(path: str | os.PathLike[str]) -> str:
    """``BACKEND_COMMITLOG`` or ``BACKEND_ROCKSMQ`` by the directory's files, read only;
    ``NotADatabaseError`` for anything else (a file, a missing or empty directory,
    another program's files)."""
    root = os.path.abspath(os.fspath(path))
    try:
        names = set(os.listdir(root))
    except FileNotFoundError:
        raise NotADatabaseError(f"{root} does not exist") from None
    except NotADirectoryError:
        raise NotADatabaseError(f"{root} is a file, not a store directory") from None
    except OSError as exc:
        raise StorageError(f"cannot read the directory {root}: {exc.strerror}") from None
    if FORMAT_FILE in names:
        return BACKEND_COMMITLOG
    if names & {"CURRENT", storage.LOCK_FILE_NAME, RECORD_FILE_NAME}:
        return BACKEND_ROCKSMQ
    raise NotADatabaseError(
        f"{root} holds neither a commit-log store ({FORMAT_FILE}) nor a RocksMQ database "
        f"(CURRENT, {storage.LOCK_FILE_NAME})" + ("" if names else ": it is empty")
    )


def check_store(path: str | os.PathLike[str]) -> StoreCheck:
    """Check the store at ``path`` (either backend) without writing to it.
    ``NotADatabaseError`` when it is no store of either."""
    root = os.path.abspath(os.fspath(path))
    backend = detect_backend(root)
    if backend == BACKEND_COMMITLOG:
        return _check_commitlog(root)
    return _check_rocksmq(root)


# --------------------------------------------------------------------------- RocksMQ


def _check_rocksmq(root: str) -> StoreCheck:
    found = StoreCheck(BACKEND_ROCKSMQ, root)
    try:
        with storage.inspect(root) as store:
            if store.needs_init:
                found.notes.append("an empty database whose creation was cut short: an open "
                                   "initialises it")
                found.state = State.build({}, {})
                return found
            disk = read_database(store, with_messages=True)
    except NotADatabaseError:
        raise
    except StorageError as exc:
        found.damage.append(f"an open would refuse it: {exc}")
        return found
    record = read_record(root)
    if record is None or record.state != STATE_CLOSED:
        found.notes.append("not closed cleanly (a crash, or open in another process now): an "
                           "open replays RocksDB's write-ahead log; an operation cut short at "
                           "its end is dropped whole")
    topics: dict[str, TopicState] = {}
    groups: dict[tuple[str, str], int] = {}
    for name, topic in disk.topics.items():
        assert topic.messages is not None
        topics[name] = TopicState(tuple(topic.messages), tuple(topic.pages),
                                  topic.record.open_page_bytes, topic.last_id)
        groups.update(((name, group), position) for group, position in topic.groups.items())
    found.state = State.build(topics, groups)
    return found


# --------------------------------------------------------------------------- commit log


def _check_commitlog(root: str) -> StoreCheck:
    found = StoreCheck(BACKEND_COMMITLOG, root)
    if os.path.lexists(os.path.join(root, "abort")):
        found.notes.append("not closed cleanly (abort marker present: a crash, or open in "
                           "another process now): consume-queue entries past the checkpoint "
                           "are rebuilt from the log")
    try:
        store = open_store(OverlayFileSystem(), root, DEFAULT_GEOMETRY, None)
    except StorageError as exc:
        found.damage.append(f"recovery would refuse it: {exc}")
        return found
    try:
        found.dropped.extend(store.report)
        found.damage.extend(_log_problems(store))
        _read_state(store, found)
    except OSError as exc:  # the disk refused a read (EIO): that is what is wrong
        found.damage.append(f"reading the store failed: {exc}")
    finally:
        store.release()
    return found


def _read_state(store: OpenStore, found: StoreCheck) -> None:
    """``found.state``: every retained message read through its entry; what cannot be
    read is named in ``found.damage`` and left out."""
    topics: dict[str, TopicState] = {}
    groups: dict[tuple[str, str], int] = {}
    unreadable: list[str] = []
    for name, topic in sorted(store.meta.topics.items()):
        messages = _read_topic(store, topic, unreadable)
        topics[name] = TopicState(tuple(messages), tuple(topic.pages),
                                  topic.open_page_bytes, topic.last_id)
        groups.update(((name, group), position) for group, position in topic.groups.items())
    found.damage.extend(_named(unreadable))
    found.state = State.build(topics, groups)


def _log_problems(store: OpenStore) -> list[str]:
    """Every record of the whole log checked, segment after segment: what is invalid
    before the end that recovery keeps (recovery scans only from the checkpoint; a read
    of such a record is refused)."""
    log = store.log
    problems: list[str] = []
    position = log.min_offset
    while position < log.end_offset:
        scan = log.scan(position)
        if scan.problem is None or scan.end_offset >= log.end_offset:
            break
        problems.append(f"{scan.problem} (before the end recovery keeps: reads of the "
                        "messages there are refused)")
        later = [segment.start for segment in log.segments if segment.start > scan.end_offset]
        if not later:
            break
        position = later[0]
    return problems


def _read_topic(store: OpenStore, topic: TopicMeta, unreadable: list[str]
                ) -> list[ConsumerMessage]:
    """The retained messages of ``topic`` through its consume queue, every record checked;
    what cannot be read is added to ``unreadable`` and left out."""
    queue = store.cq(topic.incarnation)
    first = topic.trim_id + 1
    entries = queue.get(topic.cq_index(first), topic.last_id - topic.trim_id)
    messages: list[ConsumerMessage] = []
    places: list[tuple[int, int, int]] = []
    for msg_id, entry in enumerate(entries, start=first):
        if entry is None or entry.msg_id != msg_id:
            unreadable.append(f"{queue.directory}: no entry for id {msg_id}")
        else:
            places.append(entry)
    for start in range(0, len(places), _READ_CHUNK_ENTRIES):
        chunk = places[start : start + _READ_CHUNK_ENTRIES]
        try:
            messages += _messages(store, topic, chunk)
        except CorruptDatabaseError:
            for place in chunk:  # one by one, to name each that cannot be read
                try:
                    messages += _messages(store, topic, [place])
                except CorruptDatabaseError as exc:
                    unreadable.append(f"topic {topic.name!r} id {place[2]}: {exc}")
    return messages


def _messages(store: OpenStore, topic: TopicMeta, places: list[tuple[int, int, int]]
              ) -> list[ConsumerMessage]:
    """The messages at consume-queue entries ``places``, each checked to be the one its
    entry names (``CorruptDatabaseError`` otherwise)."""
    result: list[ConsumerMessage] = []
    for (_offset, _size, msg_id), record in zip(places, store.log.read_messages(places),
                                                strict=True):
        if record.is_control or record.incarnation != topic.incarnation or (
                record.queue_offset != msg_id):
            raise CorruptDatabaseError(f"the entry of id {msg_id} points at another record")
        try:
            properties = records.decode_properties(record.properties)
        except records.RecordError as exc:
            raise CorruptDatabaseError(f"id {msg_id}: {exc}") from None
        result.append(ConsumerMessage(msg_id, record.body, properties))
    return result


def _named(problems: list[str]) -> list[str]:
    if len(problems) <= MAX_NAMED_PROBLEMS:
        return problems
    rest = len(problems) - MAX_NAMED_PROBLEMS
    return [*problems[:MAX_NAMED_PROBLEMS], f"... and {rest} more message(s) that cannot be read"]


def iter_dump(check: StoreCheck) -> Iterator[dict[str, object]]:
    """A checked store's content as JSON-ready records: the store, then per topic the
    topic (pages and all), its groups and its messages (payloads in base64)."""
    yield {"kind": "store", "backend": check.backend, "path": check.path}
    state = check.state
    if state is None:
        return
    for name, topic in state.topics.items():
        yield {"kind": "topic", "topic": name, "last_id": topic.last_id,
               "open_page_bytes": topic.open_page_bytes,
               "pages": [{"end_id": page.end_id, "size_bytes": page.size_bytes,
                          "closed_ts": page.closed_ts, "acked_ts": page.acked_ts}
                         for page in topic.pages]}
        for (owner, group), position in state.groups.items():
            if owner == name:
                yield {"kind": "group", "topic": name, "group": group, "position": position}
        for message in topic.messages:
            yield {"kind": "message", "topic": name, "id": message.msg_id,
                   "payload_base64": base64.b64encode(message.payload).decode("ascii"),
                   "properties": dict(message.properties)}
