"""The determinism check's pairs: each re-run of a seed (a *twin*, ``determinism_repeat``
1) with every first run of its key (sweep, profile, seed, implementation), as a join of
the rows would pair them, exact across data files, and in Arrow tables end to end.

A report task returns, for its file, two small tables: the file's twins, and the file's
first runs that share a seed with one of them (``file_twins``); the driver learns each
file's first-run seed ranges too. A twin whose first run lies in another file is found by
a second, small pass over the files whose seed range holds its seed (``lookups``,
``lookup_firsts``). The driver then joins all twins with all first runs found, once
(``pairs``): the rows a Python dict per twin cost (10 files of 1M rows: 100,000 twins
pickled, merged and paired one by one, ≈ 2 s of the driver's CPU) stay columns.

Runs are compared by ``trace_hash`` (the first 64 bits of the trace's SHA-256, a column of
row schema 5; taken from ``trace_digest`` in older rows): reading it costs a fraction of
reading the digests. The digests themselves are read for the pairs that differ only
(``mismatches``), from the file and row each run of a pair carries. A first run found by
both passes (its file holds a twin of the key and was asked for another file's) counts
once: the driver keeps distinct (file, row) first runs.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from rmqsim.reports.schema import trace_hash

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "KEY",
    "empty_twins",
    "file_twins",
    "lookup_firsts",
    "lookups",
    "mismatches",
    "pairs",
    "twin_columns",
]

#: A twin's key (``profile`` comes from the file's directory).
KEY = ("sweep_id", "profile", "seed", "implementation")


def twin_columns(version: int) -> tuple[str, ...]:
    """The columns that pair twins with their first runs in rows of schema ``version``."""
    digest = "trace_hash" if version >= 5 else "trace_digest"
    return ("sweep_id", "seed", "implementation", "determinism_repeat", digest)


def _schema(hash_name: str) -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [
            ("sweep_id", pa.string()),
            ("profile", pa.string()),
            ("seed", pa.int64()),
            ("implementation", pa.string()),
            (hash_name, pa.int64()),
            ("path", pa.string()),
            ("row", pa.int64()),
        ]
    )


def empty_twins() -> pa.Table:
    return _schema("repeat_hash").empty_table()


def _empty_firsts() -> pa.Table:
    return _schema("trace_hash").empty_table()


def _keyed(rows: pa.Table, profile: str | None, path: str) -> pa.Table:
    """``rows`` (``twin_columns`` and their row number ``row``) with their key's strings
    as plain strings (a file's dictionaries are its own), their trace hash (computed from
    the digest in rows older than schema 5), the file's ``profile`` and ``path``."""
    import pyarrow as pa

    count = rows.num_rows
    if "trace_hash" in rows.column_names:
        hashes = rows["trace_hash"]
    else:
        hashes = pa.array(map(trace_hash, rows["trace_digest"].to_pylist()), pa.int64())
    return pa.table(
        {
            "sweep_id": rows["sweep_id"].cast(pa.string()),
            "profile": pa.array([profile] * count, pa.string()),
            "seed": rows["seed"],
            "implementation": rows["implementation"].cast(pa.string()),
            "trace_hash": hashes,
            "path": pa.array([path] * count, pa.string()),
            "row": rows["row"],
        }
    )


def file_twins(rows: pa.Table, profile: str | None, path: str) -> tuple[pa.Table, pa.Table]:
    """A file's twins and its first runs among ``rows`` (its rows whose seed some twin of
    the file has: ``twin_columns`` and their row number ``row``)."""
    import pyarrow.compute as pc

    keyed = _keyed(rows, profile, path)
    repeat = pc.equal(rows["determinism_repeat"], 1)
    twins = keyed.filter(repeat).rename_columns(empty_twins().column_names)
    return twins, keyed.filter(pc.invert(repeat))


def lookups(
    twins: pa.Table, seed_ranges: dict[str, dict[tuple[Any, ...], tuple[int, int]]]
) -> dict[str, pa.Table]:
    """Per file, the keys of the twins of OTHER files whose seed its first runs' range for
    the key holds (``seed_ranges``: per file, (sweep, profile, implementation) -> lowest
    and highest first-run seed); files asked nothing are left out."""
    import pyarrow as pa
    import pyarrow.compute as pc

    asked: dict[str, list[pa.Table]] = {}
    for path, ranges in seed_ranges.items():
        for (sweep, profile, implementation), (low, high) in ranges.items():
            if profile is None or not twins.num_rows:
                continue  # a file outside a profile=... directory: its keys pair nothing
            same_key = pc.and_(
                pc.and_(pc.equal(twins["sweep_id"], sweep), pc.equal(twins["profile"], profile)),
                pc.equal(twins["implementation"], implementation),
            )
            seeds = twins["seed"]
            in_range = pc.and_(pc.greater_equal(seeds, low), pc.less_equal(seeds, high))
            mask = pc.and_(pc.and_(same_key, in_range), pc.not_equal(twins["path"], path))
            found = twins.filter(mask).select(list(KEY))
            if found.num_rows:
                asked.setdefault(path, []).append(found)
    return {path: pa.concat_tables(tables) for path, tables in asked.items()}


def lookup_firsts(rows: pa.Table, profile: str | None, path: str, wanted: pa.Table) -> pa.Table:
    """The first runs among ``rows`` (a whole file's ``twin_columns`` and ``row``) whose
    key is one of ``wanted``'s."""
    import pyarrow.compute as pc

    keyed = _keyed(rows, profile, path).filter(pc.equal(rows["determinism_repeat"], 0))
    keys = wanted.group_by(list(KEY)).aggregate([])
    found = keyed.join(keys, keys=list(KEY), join_type="left semi")
    return found.select(_empty_firsts().column_names)


def pairs(twins: Iterable[pa.Table], firsts: Iterable[pa.Table]) -> pa.Table:
    """Every twin with every first run of its key (distinct first runs: by file and row):
    rows of ``profile, seed, implementation, trace_hash, repeat_hash`` and where each run
    of the pair lies (``path, row, twin_path, twin_row``)."""
    import pyarrow as pa

    all_twins = pa.concat_tables([empty_twins(), *twins]).rename_columns(
        [*KEY, "repeat_hash", "twin_path", "twin_row"]
    )
    all_firsts = pa.concat_tables([_empty_firsts(), *firsts])
    distinct = all_firsts.group_by(list(all_firsts.column_names)).aggregate([])
    joined = all_twins.join(distinct, keys=list(KEY), join_type="inner")
    columns = ["profile", "seed", "implementation", "trace_hash", "repeat_hash"]
    return joined.select([*columns, "path", "row", "twin_path", "twin_row"])


def mismatches(found: pa.Table) -> list[dict[str, Any]]:
    """The pairs of ``found`` (``pairs``) whose runs differ, with both runs' digests read
    from their files: rows of ``profile, seed, implementation, trace_digest,
    repeat_digest``."""
    import pyarrow.compute as pc

    differ = found.filter(pc.not_equal(found["trace_hash"], found["repeat_hash"])).to_pylist()
    places = {(r["path"], r["row"]) for r in differ} | {
        (r["twin_path"], r["twin_row"]) for r in differ
    }
    digests = _digests_at(places)
    return [
        {
            "profile": r["profile"],
            "seed": r["seed"],
            "implementation": r["implementation"],
            "trace_digest": digests[(r["path"], r["row"])],
            "repeat_digest": digests[(r["twin_path"], r["twin_row"])],
        }
        for r in differ
    ]


def _digests_at(places: set[tuple[str, int]]) -> dict[tuple[str, int], str]:
    """The ``trace_digest`` of each (data file, row number) of ``places``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    found: dict[tuple[str, int], str] = {}
    for path in sorted({path for path, _row in places}):
        rows = sorted(row for where, row in places if where == path)
        column = pq.read_table(path, columns=["trace_digest"])["trace_digest"]
        for row, digest in zip(rows, column.take(pa.array(rows)).to_pylist(), strict=True):
            found[(path, row)] = digest
    return found
