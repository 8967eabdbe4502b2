"""``rmqsim report``: Spark aggregations over a sweep directory, as HTML and JSON."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from conformance.cli_common import EXIT_DIVERGENCE, EXIT_OK, UsageError, friendly_errors
from reports.cli_sweep import master_option

#: File names under the sweep directory.
HTML_NAME = "report.html"
JSON_NAME = "report.json"


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
    mismatches, 2 when SWEEP_DIR is missing or of another schema version.
    """
    from reports.aggregate import SweepDirError, check_sweep_dir, summarize, write_json
    from reports.page import write_html
    from reports.spark import spark_session

    try:
        check_sweep_dir(sweep_dir)
    except SweepDirError as exc:
        raise UsageError(str(exc)) from None
    html_file = html_file or sweep_dir / HTML_NAME
    json_file = json_file or sweep_dir / JSON_NAME
    with spark_session(master, "rmqsim report") as spark:
        try:
            summary = summarize(spark, sweep_dir.resolve())
        except SweepDirError as exc:
            raise UsageError(str(exc)) from None
    try:
        write_json(summary, json_file)
        write_html(summary, html_file)
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
