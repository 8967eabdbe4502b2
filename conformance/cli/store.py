"""``rmqsim store check PATH`` and ``rmqsim store dump PATH``: an existing store of either
backend (``impl.RocksMQ``'s RocksDB directory, or the commit-log store), checked or read
without writing a byte to it (``impl.store_check``).

Exit codes: 0 clean, 1 damaged (or a recovery would drop or repair something: each named),
2 not a store (or bad usage)."""

from __future__ import annotations

import contextlib
import json
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from rmqsim.conformance.cli.common import (
    EXIT_DIVERGENCE,
    EXIT_OK,
    UsageError,
    friendly_errors,
)

__all__ = ["store_group"]

#: Recovery's own warnings (what it drops) are the check's report: not logged twice.
_QUIET_LOGGERS = ("rmqsim.impl.commitlog.recovery",)


@click.group("store")
def store_group() -> None:
    """Check or read an existing store (RocksMQ or commit log), never writing to it."""


@contextlib.contextmanager
def _quiet_recovery() -> Iterator[None]:
    loggers = [logging.getLogger(name) for name in _QUIET_LOGGERS]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def _checked(path: Path) -> Any:
    """``check_store(path)``; no store at all, or a directory that cannot be listed, is
    bad input (exit 2)."""
    from rmqsim.impl.errors import NotADatabaseError, StorageError
    from rmqsim.impl.store_check import check_store

    try:
        with _quiet_recovery():
            return check_store(path)
    except NotADatabaseError as exc:
        raise UsageError(f"{path}: not a store: {exc}") from None
    except StorageError as exc:  # check_store reports damage; this is the directory itself
        raise UsageError(f"{path}: cannot be checked: {exc}") from None


def _kept_lines(check: Any) -> list[str]:
    state = check.state
    if state is None:
        return ["nothing: a recovery would refuse the store"]
    lines = []
    for name, topic in state.topics.items():
        ids = [message.msg_id for message in topic.messages]
        span = f"ids {ids[0]}..{ids[-1]}" if ids else "no message"
        groups = ", ".join(f"{group}={position}" for (owner, group), position
                           in state.groups.items() if owner == name) or "no group"
        lines.append(f"topic {name!r}: {span} ({len(ids)} retained, last id {topic.last_id}), "
                     f"{len(topic.pages)} closed page(s); groups: {groups}")
    return lines or ["no topic"]


@store_group.command("check")
@click.argument("path", type=click.Path(path_type=Path))
@friendly_errors
def check_command(path: Path) -> None:
    """Verify every record, consume-queue or index entry and the integrity record of the
    store at PATH (the backend is told from the directory), opened read-only; say what a
    recovery would keep and drop. Exit 0 clean, 1 damaged, 2 not a store."""
    check = _checked(path)
    verdict = "CLEAN" if check.clean else "DAMAGED"
    click.echo(f"rmqsim store check: {check.path} ({check.backend}): {verdict}")
    for line in check.damage:
        click.echo(f"  damaged    {line}")
    for line in check.dropped:
        click.echo(f"  recovery   {line}")
    for line in check.notes:
        click.echo(f"  note       {line}")
    for line in _kept_lines(check):
        click.echo(f"  keeps      {line}")
    sys.exit(EXIT_OK if check.clean else EXIT_DIVERGENCE)


@store_group.command("dump")
@click.argument("path", type=click.Path(path_type=Path))
@friendly_errors
def dump_command(path: Path) -> None:
    """Print the store at PATH as JSON lines (the store, then per topic: the topic with
    its pages, its groups with their positions, its messages with base64 payloads), as a
    recovery would keep it, read-only. Exit 1 (what is wrong on stderr) when damaged."""
    from rmqsim.impl.store_check import iter_dump

    check = _checked(path)
    try:
        for record in iter_dump(check):
            click.echo(json.dumps(record, sort_keys=True, ensure_ascii=False))
    except BrokenPipeError:  # a reader that stopped early (``| head``): not an error
        with contextlib.suppress(OSError):
            sys.stdout.close()
        sys.exit(EXIT_OK)
    for line in [*check.damage, *check.dropped]:
        click.echo(f"rmqsim store dump: {check.path}: {line}", err=True)
    sys.exit(EXIT_OK if check.clean else EXIT_DIVERGENCE)
