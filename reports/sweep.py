"""The sweep pipeline: plan (profile, seed) runs, spread them over Spark tasks, collect one
row per run into Parquet under the sweep directory (partitioned by profile).

Plan. Each (profile, seed) is one work item; a sample of them is run a second time (the
determinism check), always in a *different* task than its twin, so a difference between
processes (hash seeds, import order, leftover files) shows as two digests. Items are dealt
round-robin into a few chunks per core (one chunk = one task), which evens out profiles of
very different cost; each task runs its chunk in a temporary directory of its own.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rmqsim.conformance.adapter import Factory, resolve_impl
from rmqsim.conformance.errors import UsageError
from rmqsim.conformance.running.run import RunResult, git_commit
from rmqsim.conformance.searching.shrink_budget import DEFAULT_SHRINK_BUDGET, ShrinkBudget
from rmqsim.reports.schema import (
    COLUMNS,
    MANIFEST,
    RUNS_DIR,
    SCHEMA_VERSION,
    STATUS_DIVERGENCE,
    STATUS_ERROR,
    SchemaMismatchError,
    spark_schema,
)
from rmqsim.reports.tasks import TaskSpec, WorkItem, code_version, run_chunk

__all__ = [
    "CHUNKS_PER_CORE",
    "DEFAULT_DETERMINISM_SAMPLE",
    "PROGRESS_POLL_S",
    "SweepOutcome",
    "SweepSpec",
    "TaskProgress",
    "check_appendable",
    "check_manifest",
    "data_files",
    "determinism_sample",
    "file_rows",
    "plan_chunks",
    "read_manifest",
    "run_sweep",
]

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

#: Tasks per core: enough to balance cheap and costly seeds, few enough that task start-up
#: (a Python worker, imports, a temporary directory) stays negligible.
CHUNKS_PER_CORE = 4
#: Default share of (profile, seed) pairs run twice for the determinism check.
DEFAULT_DETERMINISM_SAMPLE = 0.02
#: How often the driver's progress bar polls Spark's status tracker, seconds.
PROGRESS_POLL_S = 0.5


def determinism_sample(pairs: Sequence[tuple[str, int]], sample: float) -> list[int]:
    """Indexes of the pairs to run twice: a fraction (``sample`` < 1) or a count (>= 1).

    The choice is seeded by the plan itself, so the same sweep checks the same pairs.
    """
    if not pairs or sample <= 0:
        return []
    count = round(sample) if sample >= 1 else max(1, round(sample * len(pairs)))
    count = min(count, len(pairs))
    rng = random.Random(f"rmqsim/determinism/{pairs[0]}/{pairs[-1]}/{len(pairs)}")
    return sorted(rng.sample(range(len(pairs)), count))


def plan_chunks(
    profiles: Sequence[str], seeds: range, parallelism: int, sample: float
) -> list[list[WorkItem]]:
    """Deal the work items into chunks (one per Spark task); twins go to another chunk."""
    pairs = [(profile, seed) for profile in profiles for seed in seeds]
    count = max(1, min(len(pairs), parallelism * CHUNKS_PER_CORE))
    chunks: list[list[WorkItem]] = [[] for _ in range(count)]
    for index, (profile, seed) in enumerate(pairs):
        chunks[index % count].append(WorkItem(profile, seed))
    for index in determinism_sample(pairs, sample):
        profile, seed = pairs[index]
        chunks[(index + 1) % count].append(WorkItem(profile, seed, repeat=1))
    return [chunk for chunk in chunks if chunk]


@dataclass(slots=True)
class SweepOutcome:
    """What the driver learns about one sweep (the rows themselves are in Parquet)."""

    sweep_id: str
    out: Path
    runs: int = 0
    repeats: int = 0
    divergences: int = 0
    errors: int = 0
    determinism_mismatches: list[tuple[str, int]] = field(default_factory=list)
    wall_s: float = 0.0
    results: list[RunResult] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.divergences or self.errors or self.determinism_mismatches)


class TaskProgress:
    """Calls ``advance(n)`` as Spark tasks of a job group finish (polls the status tracker
    from a thread: the driver has no other way to hear of a task's end in PySpark)."""

    def __init__(self, sc: SparkContext, group: str, advance: Callable[[int], None]) -> None:
        self._sc = sc
        self._group = group
        self._advance = advance
        self._done = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True, name="rmqsim-progress")

    def _completed(self) -> int:
        tracker = self._sc.statusTracker()
        total = 0
        for job_id in tracker.getJobIdsForGroup(self._group):
            job = tracker.getJobInfo(job_id)
            for stage_id in job.stageIds if job else ():
                stage = tracker.getStageInfo(stage_id)
                total += stage.numCompletedTasks if stage else 0
        return total

    def _poll(self) -> None:
        while not self._stop.wait(PROGRESS_POLL_S):
            self._tick()

    def _tick(self) -> None:
        try:
            done = self._completed()
        except Exception:  # the context is stopping: no more progress to show
            return
        if done > self._done:
            self._advance(done - self._done)
            self._done = done

    def __enter__(self) -> TaskProgress:
        self._sc.setJobGroup(self._group, "rmqsim sweep", interruptOnCancel=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._tick()


def _hidden(name: str) -> bool:
    """Whether Spark skips ``name`` when it lists a dataset (its rule, from Hadoop's:
    ``.crc`` checksums, ``_SUCCESS``, files being copied; not ``_metadata`` summaries,
    nor ``_x=1`` partition directories)."""
    if name.startswith(("_metadata", "_common_metadata")):
        return False
    return (
        (name.startswith("_") and "=" not in name)
        or name.startswith(".")
        or name.endswith("._COPYING_")
    )


def data_files(runs: Path) -> list[Path]:
    """The files under ``runs`` that Spark reads (the rows, and ``_metadata`` summaries
    if some other writer left them: Spark takes the schema from those), in a stable order."""
    found = []
    for directory, subdirs, names in os.walk(runs):
        subdirs[:] = sorted(d for d in subdirs if not _hidden(d))
        found += [Path(directory, name) for name in sorted(names) if not _hidden(name)]
    return found


def file_rows(sweep_dir: Path, files: Iterable[Path]) -> dict[str, int]:
    """The rows of each of ``files`` (read from its Parquet footer), by its path relative
    to ``sweep_dir``: what the manifest records of the files a sweep wrote."""
    import pyarrow.parquet as pq

    return {
        path.relative_to(sweep_dir).as_posix(): pq.read_metadata(path).num_rows for path in files
    }


def read_manifest(out: Path) -> dict[str, Any] | None:
    """The sweep directory's manifest, or None when there is none."""
    path = out / MANIFEST
    if not path.is_file():
        return None
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SchemaMismatchError(f"{path}: not a readable sweep manifest ({exc})") from None
    if not isinstance(manifest, dict):
        raise SchemaMismatchError(f"{path}: not a sweep manifest")
    return manifest


def check_manifest(
    out: Path, manifest: dict[str, Any], readable: Collection[int] = (SCHEMA_VERSION,)
) -> int:
    """The manifest's row schema version, or ``SchemaMismatchError`` unless it is one of
    ``readable`` (a report reads older versions too; a sweep appends to its own only)."""
    version = manifest.get("schema_version")
    if version not in readable or isinstance(version, bool):
        older = sorted(v for v in readable if v != SCHEMA_VERSION)
        also = f" (and {', '.join(map(str, older))})" if older else ""
        raise SchemaMismatchError(
            f"{out} was written with row schema version {version!r}; this rmqsim reads "
            f"version {SCHEMA_VERSION}{also} (re-run the sweep with this version)"
        )
    assert isinstance(version, int)
    return version


def check_appendable(out: Path) -> None:
    """``UsageError`` when ``out`` holds rows of another schema version (appending would
    mix two layouts in one dataset)."""
    try:
        manifest = read_manifest(out)
        if manifest is not None:
            check_manifest(out, manifest)
    except SchemaMismatchError as exc:
        raise UsageError(f"--append: {exc}") from None


def _write_manifest(
    out: Path, record: dict[str, Any], append: bool, earlier: Collection[Path] = ()
) -> None:
    """Add ``record`` to the manifest (a new one unless ``append``), with the data files
    the sweep wrote (those under ``out`` but for the ``earlier`` ones) and their rows:
    ``rmqsim report`` checks that they are all there."""
    manifest = (read_manifest(out) if append else None) or {
        "schema_version": SCHEMA_VERSION,
        "sweeps": [],
    }
    written = [path for path in data_files(out / RUNS_DIR) if path not in earlier]
    files = file_rows(out, written)
    manifest["sweeps"].append(dict(record, files=files, rows=sum(files.values())))
    tmp = out / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(out / MANIFEST)


@dataclass(frozen=True, slots=True)
class SweepSpec:
    """What a sweep runs: every seed of every profile on ``impl``, ``steps`` operations
    each (None: the profile's), a ``sample`` of the pairs twice (``determinism_sample``),
    failures shrunk within ``shrink`` (None: not shrunk), ``crash_rate`` as ``rmqsim run``'s."""

    profiles: Sequence[str]
    seeds: range
    impl: str | Factory
    steps: int | None = None
    sample: float = DEFAULT_DETERMINISM_SAMPLE
    shrink: ShrinkBudget | None = DEFAULT_SHRINK_BUDGET
    crash_rate: float = 0.0


@dataclass(frozen=True, slots=True)
class _Collected:
    """What the driver collects from Spark once the rows are written."""

    #: The runs' results brought back (``keep_results``), in no particular order.
    kept: list[RunResult]
    #: (determinism_repeat, status) -> rows.
    tallies: Counter[tuple[int, str]]
    #: (profile, seed) of the pairs whose runs left two trace digests, sorted.
    mismatched: list[tuple[str, int]]


@dataclass(slots=True)
class _TaskTally:
    """One task's part of ``_Collected``: its kept results, its rows counted by
    (determinism_repeat, status), and the trace digests of its runs of the pairs run
    twice (the twins lie in other tasks' chunks)."""

    kept: list[RunResult] = field(default_factory=list)
    tallies: Counter[tuple[int, str]] = field(default_factory=Counter)
    digests: dict[tuple[str, int], set[str]] = field(default_factory=dict)


_REPEAT, _STATUS, _PROFILE, _SEED, _DIGEST = (
    COLUMNS.index(name)
    for name in ("determinism_repeat", "status", "profile", "seed", "trace_digest")
)


def _tally(
    pairs: Iterable[tuple[RunResult | None, tuple]], twice: Collection[tuple[str, int]]
) -> _TaskTally:
    """A task's ``_TaskTally`` of its (kept result, row) pairs; ``twice``: the (profile,
    seed) pairs the plan runs twice."""
    tally = _TaskTally()
    for result, row in pairs:
        if result is not None:
            tally.kept.append(result)
        tally.tallies[(row[_REPEAT], row[_STATUS])] += 1
        key = (row[_PROFILE], row[_SEED])
        if key in twice and row[_DIGEST] is not None:
            tally.digests.setdefault(key, set()).add(row[_DIGEST])
    return tally


def _merged(tallies: Iterable[_TaskTally]) -> _Collected:
    """The tasks' tallies as one ``_Collected``: a pair is a mismatch when its runs, in
    whichever tasks, left more than one trace digest (a run without one is not counted)."""
    kept: list[RunResult] = []
    counts: Counter[tuple[int, str]] = Counter()
    digests: dict[tuple[str, int], set[str]] = {}
    for tally in tallies:
        kept.extend(tally.kept)
        counts.update(tally.tallies)
        for key, found in tally.digests.items():
            digests.setdefault(key, set()).update(found)
    mismatched = sorted(key for key, found in digests.items() if len(found) > 1)
    return _Collected(kept, counts, mismatched)


def run_sweep(
    spark: SparkSession,
    sweep: SweepSpec,
    *,
    out: Path,
    append: bool = False,
    keep_results: bool = False,
    on_tasks: Callable[[int], None] | None = None,
    on_plan: Callable[[int], None] | None = None,
) -> SweepOutcome:
    """Run ``sweep`` on ``spark`` and write its rows under ``out``.

    ``keep_results`` also brings every run's ``RunResult`` back to the driver, with its
    coverage map (the gate needs them for its JUnit report and its coverage; a large
    sweep does not). ``on_plan(tasks)`` is called
    once the number of tasks is known, ``on_tasks(n)`` as tasks finish.
    """
    out = out.resolve()
    if append:
        check_appendable(out)
    sc = spark.sparkContext
    chunks = plan_chunks(sweep.profiles, sweep.seeds, sc.defaultParallelism, sweep.sample)
    if on_plan is not None:
        on_plan(len(chunks))
    sweep_id = uuid.uuid4().hex
    impl_name = resolve_impl(sweep.impl)[0]
    spec = TaskSpec(
        impl=sweep.impl,
        out_dir=str(out),
        sweep_id=sweep_id,
        steps=sweep.steps,
        shrink=sweep.shrink,
        crash_rate=sweep.crash_rate,
        code_version=code_version(),
        coverage=keep_results,
        git_commit=git_commit(),
    )
    outcome = SweepOutcome(sweep_id=sweep_id, out=out)
    started = time.perf_counter()
    earlier = set(data_files(out / RUNS_DIR)) if append else set()
    collected = _run_tasks(spark, chunks, spec, append, keep_results, on_tasks)
    _count(outcome, collected.tallies)
    outcome.determinism_mismatches = collected.mismatched
    order = list(sweep.profiles)
    outcome.results = sorted(collected.kept, key=lambda r: (order.index(r.profile), r.seed))
    outcome.wall_s = time.perf_counter() - started
    record = _manifest_record(sweep, sweep_id, impl_name, len(chunks), sc.master)
    _write_manifest(out, record, append, earlier)
    return outcome


def _run_tasks(
    spark: SparkSession,
    chunks: list[list[WorkItem]],
    spec: TaskSpec,
    append: bool,
    keep_results: bool,
    on_tasks: Callable[[int], None] | None,
) -> _Collected:
    """Run the chunks as Spark tasks, write their rows to Parquet, collect the tallies.

    The counts and the determinism check come back from one Python job over the cached
    rows, a small object per task: not as Spark SQL groupings, whose planning, code
    generation and shuffles cost a fresh driver JVM ≈ 4 s and a warm one ≈ 1.5 s."""
    sc = spark.sparkContext
    twice = frozenset((item.profile, item.seed) for chunk in chunks for item in chunk
                      if item.repeat)  # fmt: skip

    def task(items: Iterable[list[WorkItem]]) -> Iterator[tuple[RunResult | None, tuple]]:
        for chunk in items:
            for item, result, row in run_chunk(chunk, spec):
                keep = keep_results and item.repeat == 0
                yield (result if keep else None), row

    rdd = sc.parallelize(chunks, len(chunks)).mapPartitions(task).cache()
    try:
        with TaskProgress(sc, f"rmqsim-{spec.sweep_id}", on_tasks or (lambda _n: None)):
            frame = spark.createDataFrame(rdd.map(lambda pair: pair[1]), spark_schema())
            frame.write.mode("append" if append else "overwrite").partitionBy("profile").parquet(
                str(Path(spec.out_dir) / RUNS_DIR)
            )
            tallies = rdd.mapPartitions(lambda pairs: [_tally(pairs, twice)]).collect()
    finally:
        rdd.unpersist()
    return _merged(tallies)


def _count(outcome: SweepOutcome, tallies: Counter[tuple[int, str]]) -> None:
    """Add the (determinism_repeat, status) -> rows counts to ``outcome``'s counters."""
    for (repeat, status), number in tallies.items():
        if repeat:
            outcome.repeats += number
            continue
        outcome.runs += number
        if status == STATUS_DIVERGENCE:
            outcome.divergences += number
        elif status == STATUS_ERROR:
            outcome.errors += number


def _manifest_record(
    sweep: SweepSpec, sweep_id: str, impl_name: str, tasks: int, master: str | None
) -> dict[str, Any]:
    """The manifest's record of a finished sweep."""
    shrink = sweep.shrink
    return {
        "sweep_id": sweep_id,
        "profiles": list(sweep.profiles),
        "seeds": [sweep.seeds.start, sweep.seeds.stop],
        "implementation": impl_name,
        "code_version": code_version(),
        "steps": sweep.steps,
        "determinism_sample": sweep.sample,
        "shrink": None
        if shrink is None
        else {"max_operations": shrink.max_operations, "max_seconds": shrink.max_seconds},
        "tasks": tasks,
        "master": master,
        "finished_utc": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
