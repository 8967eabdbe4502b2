"""``rmqsim protocol-check``: does a protocol server speak docs/PROTOCOL.md?

Runs ``conformance.wire.check``'s fixed programs against the server in lockstep with the
model and prints one line per check (PASS, or FAIL with what was expected and what came
back). Exit 0 when every check passes, 1 when one fails, 2 for bad usage (a command that
cannot start or does not answer ``hello``).
"""

from __future__ import annotations

import sys
from typing import Any

import click

from rmqsim.conformance.cli.common import (
    EXIT_DIVERGENCE,
    EXIT_OK,
    UsageError,
    friendly_errors,
    op_timeout_option,
)

__all__ = ["protocol_check_command"]


@click.command("protocol-check")
@click.option(
    "--impl",
    required=True,
    metavar="exec:COMMAND",
    help="The protocol server: exec:'COMMAND ARGS' (or a Python queue, message store or "
    "stream factory, served by the reference server).",
)
@op_timeout_option
@friendly_errors
def protocol_check_command(impl: str) -> None:
    """Check a protocol server (docs/PROTOCOL.md) before the gate: handshake, every
    operation and error, snapshots, the clock, retention, kill and restart, close and
    reopen, and a crash at each fault point of a produce (a stream server: its stream
    operations and errors, the queue operations the stream layer sends, the clock, kill
    and restart, a crash at each fault point of a stream produce)."""
    from rmqsim.conformance.running.process_sut import process_factory
    from rmqsim.conformance.wire.check import run_checks
    from rmqsim.conformance.wire.stream_check import run_stream_checks

    factory = process_factory(impl)  # a Python queue or streams: the reference server
    hello = getattr(factory, "rmqsim_hello", None)
    if hello is None:
        raise UsageError(f"--impl {impl}: not a protocol server")
    click.echo(f"server: {hello.implementation} (protocol 1, layer {hello.layer})")
    results: list[Any] = (run_stream_checks(factory) if hello.layer == "stream"
                          else run_checks(factory))  # fmt: skip
    for result in results:
        if result.ok:
            click.echo(f"PASS {result.check.name}: {result.check.shows}")
        else:
            click.echo(f"FAIL {result.check.name}: {result.problem}")
    points = sorted({p for r in results for p in r.points})  # the stream's: "call:point"
    if not points:
        click.echo(
            "note: the server announced no fault points: crashes land between "
            'operations only (docs/PROTOCOL.md "Fault points")'
        )
    failed = sum(not r.ok for r in results)
    click.echo(f"{len(results) - failed} passed, {failed} failed")
    sys.exit(EXIT_DIVERGENCE if failed else EXIT_OK)
