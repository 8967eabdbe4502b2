"""The ``rmqsim`` command line.

Exit codes are part of the interface: 0 all conform, 1 a divergence was found, 2 bad usage
or bad input. Subcommands live in their own modules and are registered here, so that this
file stays an index of what the tool can do.
"""

from __future__ import annotations

import click

EXIT_OK = 0
EXIT_DIVERGENCE = 1
EXIT_USAGE = 2


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="rmqsim", prog_name="rmqsim")
def cli() -> None:
    """rmqsim: deterministic simulation and conformance harness for RocksDB-backed queues.

    Exit codes: 0 all conform, 1 a divergence was found, 2 bad usage or input.
    """


def main() -> None:
    """Console entry point (``rmqsim``)."""
    cli(prog_name="rmqsim")
