"""Shipping rmqsim, and the user's ``--impl`` module, to a cluster's executors.

A Spark worker's Python knows nothing of the driver's: a sweep's tasks import rmqsim and
the implementation under test by name, so on a cluster both are sent with the job, by
PySpark's documented way for Python code, ``SparkContext.addPyFile``: rmqsim as a zip of
the ``rmqsim`` package (its files, symbolic links of the source tree resolved), the user's
module as its ``.py`` file (or its top-level package, zipped). Native dependencies
(rocksdict's RocksDB, pyarrow) cannot travel in a zip: the executors' Python must have
them. ``executor_python`` chooses that Python: a packed environment the user names
(``--archives``, unpacked by Spark next to each executor), else ``PYSPARK_PYTHON`` as the
user set it, else the driver's own interpreter (right when the workers run on this host, or
have the same environment at the same path).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import sysconfig
import zipfile
from pathlib import Path

from rmqsim.conformance.adapter import BUILTIN_IMPLS, LEGACY_PACKAGES, Factory
from rmqsim.conformance.errors import UsageError

__all__ = [
    "ENV_ALIAS",
    "archive_spec",
    "executor_python",
    "impl_code",
    "package_zip",
    "zip_tree",
]

#: The directory a ``--archives`` environment is unpacked to in each executor's work
#: directory (the ``#alias`` of ``spark.archives``), unless the user names another.
ENV_ALIAS = "environment"
#: Archives Spark unpacks (``spark.archives``).
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".zip")


def archive_spec(archive: str) -> tuple[str, str]:
    """``(spark.archives value, alias)`` for ``--archives FILE[#ALIAS]``; ``UsageError``
    when FILE is not an existing archive Spark can unpack."""
    path_text, _, alias = archive.partition("#")
    alias = alias or ENV_ALIAS
    path = Path(path_text)
    if not path.is_file():
        raise UsageError(f"--archives {archive}: no such file")
    if not path.name.endswith(ARCHIVE_SUFFIXES):
        raise UsageError(
            f"--archives {archive}: not a packed environment ({', '.join(ARCHIVE_SUFFIXES)})"
        )
    if not alias.isidentifier():
        raise UsageError(f"--archives {archive}: #{alias} is not a plain directory name")
    return f"{path.resolve()}#{alias}", alias


def executor_python(alias: str | None) -> str:
    """The Python the executors run: the packed environment's (unpacked as ``alias``),
    else ``PYSPARK_PYTHON`` as set, else this interpreter."""
    if alias is not None:
        return f"./{alias}/bin/python"
    return os.environ.get("PYSPARK_PYTHON") or sys.executable


def zip_tree(root: Path, name: str, zip_path: Path) -> Path:
    """``root`` (a package directory) zipped as ``name/...`` into ``zip_path``, following
    symbolic links, in a stable order, without bytecode caches."""
    with zipfile.ZipFile(zip_path, "w", zipfile.ZIP_DEFLATED) as archive:
        for directory, subdirs, files in os.walk(root, followlinks=True):
            subdirs[:] = sorted(d for d in subdirs if d != "__pycache__")
            relative = Path(directory).relative_to(root)
            for file_name in sorted(files):
                if not file_name.endswith((".pyc", ".pyo")):
                    archive.write(Path(directory, file_name), Path(name, relative, file_name))
    return zip_path


def _package_dir(name: str) -> Path | None:
    """The directory of top-level package ``name``, or None when it is not a package."""
    spec = importlib.util.find_spec(name)
    locations = list(spec.submodule_search_locations or []) if spec else []
    return Path(locations[0]) if locations else None


def package_zip(dest_dir: Path) -> Path:
    """rmqsim as a zip under ``dest_dir`` (``rmqsim/...``), for ``addPyFile``."""
    root = _package_dir("rmqsim")
    assert root is not None, "rmqsim is a package"
    return zip_tree(root, "rmqsim", dest_dir / "rmqsim.zip")


def _rmqsim_module(module_name: str) -> bool:
    """Whether ``rmqsim.<module_name>`` exists (what ``load_factory`` imports for an old
    spelling such as ``conformance.mutants.x``)."""
    try:
        return importlib.util.find_spec(f"rmqsim.{module_name}") is not None
    except ModuleNotFoundError:
        return False


def _installed(origin: Path) -> bool:
    """Whether ``origin`` is in this interpreter's standard library or site-packages
    (what the executors' Python is required to have, not shipped)."""
    paths = sysconfig.get_paths()
    roots = {Path(paths[key]).resolve() for key in ("stdlib", "platstdlib", "purelib", "platlib")}
    return any(origin.resolve().is_relative_to(root) for root in roots)


def impl_code(impl: str | Factory, dest_dir: Path) -> Path | None:
    """What to ship of the ``--impl`` module: its ``.py`` file, or its top-level package
    zipped under ``dest_dir``; None for rmqsim's own, a built-in, an installed package,
    or a factory whose module has no file. The driver imported it already (``load_factory``),
    so it is found where the driver found it."""
    if isinstance(impl, str):
        module_name = BUILTIN_IMPLS.get(impl, impl).partition(":")[0]
    else:
        module_name = getattr(impl, "__module__", None) or ""
    top_level = module_name.partition(".")[0]
    if not top_level or top_level == "rmqsim":
        return None
    if top_level in LEGACY_PACKAGES and _rmqsim_module(module_name):
        return None  # an old spelling of rmqsim's own module (``conformance.mutants...``)
    spec = importlib.util.find_spec(top_level)
    if spec is None or spec.origin in (None, "built-in", "frozen"):
        return None
    origin = Path(spec.origin)
    if _installed(origin):
        return None
    package = _package_dir(top_level)
    if package is None:
        return origin if origin.suffix == ".py" else None
    return zip_tree(package, top_level, dest_dir / f"{top_level}.zip")
