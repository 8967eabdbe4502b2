"""rmqsim: a deterministic simulation and conformance harness for embedded message queues.

Everything rmqsim installs lives under this one name, so that it never clashes with a
user's own packages: ``rmqsim.model`` (the reference models), ``rmqsim.impl`` (the real
implementations), ``rmqsim.scenarios`` (the simulations), ``rmqsim.conformance`` (the
harness and the ``rmqsim`` command) and ``rmqsim.reports`` (Spark sweeps and reports, with
the ``spark`` extra). In the source tree these are the top-level folders ``model/``,
``impl/``, ``scenarios/``, ``conformance/`` and ``reports/``.
"""

from __future__ import annotations

from rmqsim.moved import install as _install_moved_names

__all__ = ["__version__"]


def __getattr__(name: str) -> str:
    """``__version__``, looked up when first asked: ``importlib.metadata`` costs a process
    that never asks (a protocol server, started once per open) a third of its start."""
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("rmqsim")
    except PackageNotFoundError:  # a source tree that was never installed
        found = "0+unknown"
    globals()["__version__"] = found
    return found


_install_moved_names()
