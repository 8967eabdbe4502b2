"""``rmqsim report``: Spark schedules, pyarrow aggregates a sweep directory; HTML and JSON."""

from __future__ import annotations

import importlib
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import click

from rmqsim.conformance.cli.common import friendly_errors
from rmqsim.conformance.errors import EXIT_DIVERGENCE, EXIT_OK, UsageError
from rmqsim.reports.cli_sweep import master_option

__all__ = ["HTML_NAME", "JSON_NAME", "report_command", "writable_target"]

#: File names under the sweep directory.
HTML_NAME = "report.html"
JSON_NAME = "report.json"


def writable_target(path: Path, option: str, given: bool) -> Path:
    """``path`` if the report can be written there, else ``UsageError`` naming ``option``.

    Checked before Spark starts, so that a typo in ``--html``/``--json`` (or a read-only
    sweep directory for the defaults) costs a fraction of a second, not a Spark job. A
    missing parent directory is created, as ``--out`` is by the other commands.
    """
    from rmqsim.conformance.running.scratch import unwritable_dir

    where = f"{option} {path}" if given else f"{path} (the default of {option})"
    if path.is_dir():
        raise UsageError(f"{where}: is a directory, not a file")
    problem = unwritable_dir(path.parent)
    if problem is None and path.exists() and not os.access(path, os.W_OK):
        problem = "the file is read-only"
    if problem is not None:
        raise UsageError(f"{where}: cannot be written: {problem}")
    return path


@click.command("report")
@click.argument("sweep_dir", type=click.Path(path_type=Path))
@click.option(
    "--html",
    "html_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help=f"Where the page goes (default: SWEEP_DIR/{HTML_NAME}).",
)
@click.option(
    "--json",
    "json_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help=f"Where the JSON summary goes (default: SWEEP_DIR/{JSON_NAME}).",
)
@master_option
@friendly_errors
def report_command(
    sweep_dir: Path, html_file: Path | None, json_file: Path | None, master: str
) -> None:
    """Totals, failure groups, coverage, determinism and timings of a sweep directory.

    Exit 0 when every run conformed, 1 when the sweep holds failures or determinism
    mismatches, 2 on bad input: SWEEP_DIR missing, not a directory, of another schema
    version or with a damaged Parquet file, or an output that cannot be written.
    """
    from rmqsim.reports.aggregate import SweepDirError, check_sweep_dir, summarize
    from rmqsim.reports.spark import Shipping, spark_context

    try:
        check_sweep_dir(sweep_dir)
    except SweepDirError as exc:
        raise UsageError(str(exc)) from None
    html_file = writable_target(html_file or sweep_dir / HTML_NAME, "--html", html_file is not None)
    json_file = writable_target(json_file or sweep_dir / JSON_NAME, "--json", json_file is not None)
    if html_file.resolve() == json_file.resolve():
        raise UsageError(
            f"--html and --json name the same file ({html_file}): one would overwrite the other"
        )
    # The tasks aggregate with pyarrow (rmqsim.reports.partials): Spark's JVM only
    # schedules them, whatever the rows, so it starts with its quick-start options. A
    # thread does the driver's own work while this one waits on the JVM (the GIL free):
    # the page's imports (matplotlib) while it starts, the writing while it stops.
    shipping = Shipping(rmqsim=True)
    with ThreadPoolExecutor(max_workers=1) as beside:
        beside.submit(importlib.import_module, "rmqsim.reports.page")
        with spark_context(master, "rmqsim report", shipping=shipping, quick_start=True) as sc:
            try:
                summary = summarize(sc, sweep_dir.resolve())
            except SweepDirError as exc:
                raise UsageError(str(exc)) from None
            written = beside.submit(_write, summary, json_file, html_file)
        try:
            written.result()
        except OSError as exc:
            raise UsageError(f"cannot write the report: {exc}") from None
    totals = summary["totals"]
    mismatches = summary["determinism"]["mismatches"]
    click.echo(
        f"rmqsim report: {totals['runs']} runs, {totals['failed']} failed in "
        f"{len(summary['failures'])} signature(s), {len(mismatches)} determinism "
        f"mismatch(es); {html_file}, {json_file}"
    )
    for failure in summary["failures"][:5]:
        smallest = failure["smallest"]
        click.echo(
            f"  {failure['count']:>6} × {failure['signature']}  smallest: "
            f"{smallest['profile']} seed {smallest['seed']} ({smallest['repro_steps']} ops) "
            f"{smallest['trace_path'] or ''}"
        )
    sys.exit(EXIT_DIVERGENCE if totals["failed"] or mismatches else EXIT_OK)


def _write(summary: dict[str, Any], json_file: Path, html_file: Path) -> None:
    from rmqsim.reports.aggregate import write_json
    from rmqsim.reports.page import write_html

    write_json(summary, json_file)
    write_html(summary, html_file)
