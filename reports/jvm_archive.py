"""The Spark driver JVM's class-data sharing archive: about 2 s off every Spark start.

A Spark context spends most of its start loading, parsing and verifying the thousands of
classes it needs (≈ 3.5 s of a report's start on 2 cores). A JDK (13 on) can dump the
classes one run loaded into an archive (``-XX:ArchiveClassesAtExit``) that later JVMs map
instead (``-XX:SharedArchiveFile``, "AppCDS"): the context then starts in ≈ 2 s and its
first job runs ≈ 0.5 s sooner (docs/BENCHMARKS.md).

The archive is built once per machine, pyspark version and Java (its file name holds
them), by ``build_archive``: a JVM of its own, in a subprocess, starts a context, runs a
Python task, stops, and exits; only once that JVM has EXITED is its dump renamed into
place. The order matters: a JVM that maps a truncated archive dies of SIGBUS, so no JVM
may ever be given a dump still being written, and the archive's size is recorded beside
it: one of another size (truncated since) is built again. A start with an archive that a
JVM still cannot use (damaged otherwise) is retried without it, and the archive removed
(``reports.spark``).

``RMQSIM_CACHE_DIR`` chooses the directory (default ``$XDG_CACHE_HOME/rmqsim`` or
``~/.cache/rmqsim``; one whose path holds a space cannot be given to Spark's JVM, so none
is used); ``RMQSIM_JVM_ARCHIVE=off`` does without an archive. A cache directory that
cannot be written, or a Java that cannot build an archive (the first failure is recorded
beside it, ``.failed``, and not tried again), means no archive, never an error. A build
that fails removes its partial files; those of a build killed or timed out are removed by
a later start once they are old (``remove_stale_dumps``).
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

__all__ = [
    "ARCHIVE_ENV",
    "BUILD_TIMEOUT_S",
    "CACHE_ENV",
    "DRIVER_JAVA_OPTIONS",
    "archive_path",
    "build_archive",
    "dump_options",
    "ensure_archive",
    "is_complete",
    "remove_stale_dumps",
    "use_options",
]

CACHE_ENV = "RMQSIM_CACHE_DIR"
#: ``off`` (or ``0``, ``no``, ``false``): Spark starts without a class archive.
ARCHIVE_ENV = "RMQSIM_JVM_ARCHIVE"
#: How long building the archive may take (a context start while recording, a task, the
#: dump at exit: ≈ 12 s on 2 idle cores), seconds.
BUILD_TIMEOUT_S = 180.0
DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"
#: The JVM's own messages about the archive (classes it cannot archive, a mismatch that
#: makes it start without) stay out of rmqsim's output.
_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def _enabled() -> bool:
    return os.environ.get(ARCHIVE_ENV, "on").strip().lower() not in ("off", "0", "no", "false")


def _cache_dir() -> Path:
    chosen = os.environ.get(CACHE_ENV)
    if chosen:
        return Path(chosen)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rmqsim"


def _java() -> Path | None:
    """The ``java`` Spark's launcher runs: ``$JAVA_HOME/bin/java``, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def archive_path() -> Path | None:
    """Where the archive of this pyspark and this Java lies (whether built or not); None
    when archives are off or there is no Java to name."""
    if not _enabled():
        return None
    java = _java()
    if java is None:
        return None
    import pyspark

    stat = java.stat()
    key = f"{pyspark.__version__}|{java}|{stat.st_size}|{stat.st_mtime_ns}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    path = _cache_dir() / f"spark-{pyspark.__version__}-{digest}.jsa"
    # Spark splits the JVM's options at whitespace: a path with a space cannot be given.
    return None if any(c.isspace() for c in str(path)) else path


def use_options(path: Path) -> str:
    """JVM options that map the archive at ``path`` (an existing, complete one); a JVM
    that crashes anyway leaves its error file beside it, not in the working directory."""
    return f"-XX:SharedArchiveFile={path} -XX:ErrorFile={path.parent}/hs_err_pid%p.log {_QUIET}"


def _size_file(path: Path) -> Path:
    """Where the archive's size in bytes is recorded once it is complete."""
    return path.with_name(f"{path.name}.bytes")


def is_complete(path: Path) -> bool:
    """The archive at ``path`` exists and has the size recorded when it was built: a
    truncated copy (a full disk, a partial restore) would crash the JVM that maps it."""
    try:
        recorded = int(_size_file(path).read_text().strip())
        return path.stat().st_size == recorded
    except (OSError, ValueError):
        return False


def dump_options(path: Path) -> str:
    """JVM options that dump the classes the JVM loaded to ``path`` when it exits."""
    return f"-XX:ArchiveClassesAtExit={path} {_QUIET}"


def ensure_archive(path: Path, conf: dict[str, str]) -> bool:
    """True once the archive at ``path`` exists: built now (a subprocess starting Spark
    with ``conf``, the configuration of the starts it serves; a line on stderr saying so)
    when it does not. False when it could not be built (the reason is on stderr); Spark
    then starts without one."""
    if is_complete(path):
        return True
    remove_stale_dumps(path)
    if _failed_file(path).exists():
        return False  # this Java could not build one: not tried at every start
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.unlink(missing_ok=True)  # damaged, or its size never recorded
    except OSError:
        return False
    print(f"rmqsim: building the Spark JVM's class archive (once per machine): {path}",
          file=sys.stderr, flush=True)  # fmt: skip
    command = [sys.executable, "-m", "rmqsim.reports.jvm_archive", str(path), json.dumps(conf)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S,
                              check=False)  # fmt: skip
    except subprocess.TimeoutExpired:
        print(f"rmqsim: the class archive took over {BUILD_TIMEOUT_S:.0f} s: starting without",
              file=sys.stderr)  # fmt: skip
        return False
    if done.returncode != 0 or not is_complete(path):
        reason = (done.stderr.strip().splitlines() or ["no message"])[-1]
        print(f"rmqsim: no class archive ({reason}): starting without; remove "
              f"{_failed_file(path)} to try again", file=sys.stderr)  # fmt: skip
        with contextlib.suppress(OSError):  # a read-only cache: tried again next time
            _failed_file(path).write_text(reason + "\n")
        return False
    return True


def remove_stale_dumps(path: Path, now_s: float | None = None) -> list[Path]:
    """Remove the partial files of builds of ``path`` that never renamed theirs into
    place (the build failed, timed out, or was killed: its JVM may even write its dump
    after its parent is gone) once they are older than two build time limits, so that a
    build running now keeps its own. Returns what was removed. (Wall time: only to age
    cache files, never in a trace.)"""
    now_s = time.time() if now_s is None else now_s
    removed: list[Path] = []
    for part in sorted(path.parent.glob(f"{glob.escape(path.name)}*.part")):
        with contextlib.suppress(OSError):  # gone already, or a cache we cannot write
            if now_s - part.stat().st_mtime > 2 * BUILD_TIMEOUT_S:
                part.unlink()
                removed.append(part)
    return removed


def _failed_file(path: Path) -> Path:
    """Where a build that failed says why (and that no other build is tried)."""
    return path.with_name(f"{path.name}.failed")


def build_archive(path: Path, settings: dict[str, str]) -> None:
    """Start a Spark context of ``settings`` whose JVM dumps its classes at exit, run a
    Python task, stop, end the JVM and wait for it; then rename the complete dump to
    ``path``."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    part = path.with_name(f"{path.name}.{os.getpid()}.part")
    size = _size_file(path)
    written = size.with_name(f"{size.name}.{os.getpid()}.part")
    java = f"{settings.get(DRIVER_JAVA_OPTIONS, '')} {dump_options(part)}".strip()
    conf = SparkConf().setAll([*settings.items(), (DRIVER_JAVA_OPTIONS, java)])
    os.environ["PYSPARK_PYTHON"] = sys.executable
    try:
        gateway = launch_gateway(conf)
        sc = SparkContext(conf=conf, gateway=gateway)
        try:
            sc.parallelize(range(2), 2).mapPartitions(lambda rows: [sum(rows)]).collect()
        finally:
            sc.stop()
            gateway.shutdown()
        gateway.proc.stdin.close()  # the gateway JVM exits at the end of its stdin, and dumps
        if gateway.proc.wait(timeout=BUILD_TIMEOUT_S) != 0 or not part.exists():
            raise RuntimeError("the JVM did not write its class archive")
        written.write_text(f"{part.stat().st_size}\n")
        os.replace(written, size)
        os.replace(part, path)
    finally:  # a build that failed leaves no partial file behind
        for leftover in (part, written):
            with contextlib.suppress(OSError):
                leftover.unlink(missing_ok=True)


if __name__ == "__main__":  # ``ensure_archive``'s subprocess
    build_archive(Path(sys.argv[1]), json.loads(sys.argv[2]))
