"""The ``rmqsim`` command line: ``app`` (the group and the run, replay and gate commands),
``common`` (what every command shares: options, exit codes, progress, errors) and the
commands loaded when used: ``crash`` (crash-sweep, shrink), ``fuzz``, ``mutants``,
``store`` (store check, store dump).
``rmqsim.conformance.bench.backends`` and the ``rmqsim.commands`` entry points (Spark's sweep,
report and sweep-bench) add theirs."""

from __future__ import annotations

from rmqsim.conformance.cli.app import cli, main

__all__ = ["cli", "main"]
