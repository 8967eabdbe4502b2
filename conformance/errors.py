"""The errors and exit codes that the library and the command line share.

Library code (the harness, ``reports/``) raises ``UsageError`` for bad input from a user (a
name, a path, an option's value); the command line prints it as one line and exits with
``EXIT_USAGE``. It lives here, in a module of neither, so that a library never imports the
command line to say that its input is wrong.
"""

from __future__ import annotations

__all__ = ["EXIT_DIVERGENCE", "EXIT_INTERNAL", "EXIT_OK", "EXIT_USAGE", "UsageError"]

#: Every check passed.
EXIT_OK = 0
#: The implementation diverged from the model (or broke a promise): a finding.
EXIT_DIVERGENCE = 1
#: Bad input from the user (``UsageError``), or a store or process that cannot be used.
EXIT_USAGE = 2
#: rmqsim's own bug: never for anything an implementation or a user did.
EXIT_INTERNAL = 3


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit code 2."""
