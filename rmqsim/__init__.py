"""rmqsim: a deterministic simulation and conformance harness for embedded message queues.

Everything rmqsim installs lives under this one name, so that it never clashes with a
user's own packages: ``rmqsim.model`` (the reference models), ``rmqsim.impl`` (the real
implementations), ``rmqsim.scenarios`` (the simulations), ``rmqsim.conformance`` (the
harness and the ``rmqsim`` command) and ``rmqsim.reports`` (Spark sweeps and reports, with
the ``spark`` extra). In the source tree these are the top-level folders ``model/``,
``impl/``, ``scenarios/``, ``conformance/`` and ``reports/``.
"""

from importlib.metadata import PackageNotFoundError, version

__all__ = ["__version__"]

try:
    __version__ = version("rmqsim")
except PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"

from rmqsim.moved import install as _install_moved_names

_install_moved_names()
