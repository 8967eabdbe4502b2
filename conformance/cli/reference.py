"""Every ``rmqsim`` command in one click group, loaded at once: what the documentation
site's CLI reference (``docs/reference/cli.md``) is generated from, by mkdocs-click.

``rmqsim``'s own group loads most commands only when they are run (``app.LazyGroup``) and
takes others from the ``rmqsim.commands`` entry points (Spark's sweep, report and
sweep-bench), so a generator that reads the group's commands would miss them: ``group()``
asks the group for every command ``rmqsim --help`` lists, exactly as ``--help`` does."""

from __future__ import annotations

import click

from rmqsim.conformance.cli.app import cli

__all__ = ["group", "reference"]


def group() -> click.Group:
    """A group named ``rmqsim`` holding each command ``rmqsim --help`` lists."""
    ctx = click.Context(cli, info_name="rmqsim")
    everything = click.Group("rmqsim", help=cli.help, params=list(cli.params),
                             context_settings=cli.context_settings)
    for name in cli.list_commands(ctx):
        command = cli.get_command(ctx, name)
        if command is not None:
            everything.add_command(command, name)
    return everything


#: The group the reference is generated from (``:command: reference``).
reference = group()
