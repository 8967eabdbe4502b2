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

A first run found by both passes (its file holds a twin of the key and was asked for
another file's) counts once: every first run carries its file and row number, and the
driver keeps distinct rows.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "KEY",
    "TWIN_COLUMNS",
    "empty_firsts",
    "empty_twins",
    "file_twins",
    "lookup_firsts",
    "lookups",
    "pairs",
]

#: The columns that pair twins with their first runs, as a data file holds them.
TWIN_COLUMNS = ("sweep_id", "seed", "implementation", "determinism_repeat", "trace_digest")
#: A twin's key (``profile`` comes from the file's directory).
KEY = ("sweep_id", "profile", "seed", "implementation")


def _twins_schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [
            ("sweep_id", pa.string()),
            ("profile", pa.string()),
            ("seed", pa.int64()),
            ("implementation", pa.string()),
            ("repeat_digest", pa.string()),
            ("path", pa.string()),
        ]
    )


def _firsts_schema() -> pa.Schema:
    import pyarrow as pa

    fields = [f for f in _twins_schema() if f.name != "repeat_digest"]
    return pa.schema([*fields[:4], ("trace_digest", pa.string()), fields[4], ("row", pa.int64())])


def empty_twins() -> pa.Table:
    return _twins_schema().empty_table()


def empty_firsts() -> pa.Table:
    return _firsts_schema().empty_table()


def _keyed(rows: pa.Table, profile: str | None, path: str) -> pa.Table:
    """``rows`` with their key's strings as plain strings (a file's dictionaries are its
    own), the file's ``profile`` and ``path`` as columns."""
    import pyarrow as pa

    count = rows.num_rows
    return pa.table(
        {
            "sweep_id": rows["sweep_id"].cast(pa.string()),
            "profile": pa.array([profile] * count, pa.string()),
            "seed": rows["seed"],
            "implementation": rows["implementation"].cast(pa.string()),
            "trace_digest": rows["trace_digest"].cast(pa.string()),
            "path": pa.array([path] * count, pa.string()),
            "row": rows["row"],
        }
    )


def file_twins(rows: pa.Table, profile: str | None, path: str) -> tuple[pa.Table, pa.Table]:
    """A file's twins and its first runs among ``rows`` (its rows whose seed some twin of
    the file has, ``TWIN_COLUMNS`` and their row number ``row``)."""
    import pyarrow.compute as pc

    keyed = _keyed(rows, profile, path)
    repeat = pc.equal(rows["determinism_repeat"], 1)
    twins = (
        keyed.filter(repeat).drop_columns(["row"]).rename_columns([*KEY, "repeat_digest", "path"])
    )
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
            mask = pc.and_(
                pc.and_(pc.equal(twins["sweep_id"], sweep), pc.equal(twins["profile"], profile)),
                pc.and_(
                    pc.equal(twins["implementation"], implementation),
                    pc.not_equal(twins["path"], path),
                ),
            )
            seeds = twins["seed"]
            mask = pc.and_(mask, pc.and_(pc.greater_equal(seeds, low), pc.less_equal(seeds, high)))
            found = twins.filter(mask).select(list(KEY))
            if found.num_rows:
                asked.setdefault(path, []).append(found)
    return {path: pa.concat_tables(tables) for path, tables in asked.items()}


def lookup_firsts(rows: pa.Table, profile: str | None, path: str, wanted: pa.Table) -> pa.Table:
    """The first runs among ``rows`` (a whole file's ``TWIN_COLUMNS`` and ``row``) whose
    key is one of ``wanted``'s."""
    import pyarrow.compute as pc

    keyed = _keyed(rows, profile, path).filter(pc.equal(rows["determinism_repeat"], 0))
    keys = wanted.group_by(list(KEY)).aggregate([])
    return keyed.join(keys, keys=list(KEY), join_type="left semi").select(_firsts_schema().names)


def pairs(twins: Iterable[pa.Table], firsts: Iterable[pa.Table]) -> pa.Table:
    """Every twin with every first run of its key (distinct first runs: by file and row),
    as ``profile, seed, implementation, trace_digest, repeat_digest`` rows."""
    import pyarrow as pa

    all_twins = pa.concat_tables([empty_twins(), *twins])
    all_firsts = pa.concat_tables([empty_firsts(), *firsts])
    distinct = all_firsts.group_by(list(all_firsts.column_names)).aggregate([])
    joined = all_twins.select([*KEY, "repeat_digest"]).join(
        distinct.select([*KEY, "trace_digest"]), keys=list(KEY), join_type="inner"
    )
    return joined.select(["profile", "seed", "implementation", "trace_digest", "repeat_digest"])
