"""rmqsim as a user gets it: the wheel is built, installed (not editable) into a fresh
virtual environment outside the checkout, and used from a project of the user's that has
its own ``model`` and ``reports`` packages (``tests/install_project``): ``rmqsim gate``
runs there, and so does the project's pytest with rmqsim's plugin. Also the namespace: the
wheel holds one top-level package, ``rmqsim``, and no module of the tree imports rmqsim's
folders by their bare names.

To stay fast and offline, the new environment installs only the wheel: its core
dependencies (rocksdict, simpy, hypothesis, pytest, click, rich and theirs, but none of the
``spark`` extra) are the dev environment's, linked into one directory that the new
environment's ``.pth`` file puts on its path, where pip finds them already installed.
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from rmqsim.conformance.adapter import LEGACY_PACKAGES
from rmqsim.conformance.cli.common import SPARK_EXTRA_INSTALL
from tests.imports import imported_modules

ROOT = Path(__file__).resolve().parent.parent
PROJECT = Path(__file__).resolve().parent / "install_project"
#: What a source copy for the build needs: rmqsim/ links to the five folders.
SOURCES = ("pyproject.toml", "README.md", "rmqsim", *sorted(LEGACY_PACKAGES))
#: Variables of this run that must not reach the user's processes.
OUTER_VARIABLES = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTEST_ADDOPTS", "PYTEST_PLUGINS")
TIMEOUT_S = 300
VERSION = importlib.metadata.version("rmqsim")


@dataclass(frozen=True, slots=True)
class Installed:
    """The built wheel, and the environment it is installed in."""

    wheel: Path
    venv: Path
    env: dict[str, str]

    def run(self, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
        """A command of the new environment's ``bin`` (``rmqsim``, ``python``), in ``cwd``."""
        return subprocess.run(
            [str(self.venv / "bin" / args[0]), *args[1:]],
            cwd=cwd, env=self.env, capture_output=True, text=True,
            timeout=TIMEOUT_S, check=False,
        )  # fmt: skip


def _build_wheel(into: Path) -> Path:
    """The wheel, built by pip from a copy of the sources (a build in the checkout would
    leave ``build/`` there, shared with whoever else builds), offline: setuptools comes
    with the dev extra."""
    source = into / "source"
    source.mkdir()
    ignored = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, symlinks=True, ignore=ignored)
        else:
            shutil.copy2(ROOT / name, source / name)
    wheels = into / "wheels"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "-q", "-w", str(wheels), str(source)],
        capture_output=True, text=True, timeout=TIMEOUT_S, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    (wheel,) = wheels.glob("rmqsim-*.whl")
    return wheel


def _core_distributions() -> dict[str, importlib.metadata.Distribution]:
    """rmqsim's dependencies without extras, and theirs, as installed in this environment."""
    found: dict[str, importlib.metadata.Distribution] = {}
    wanted = [
        Requirement(text).name
        for text in importlib.metadata.requires("rmqsim") or []
        if Requirement(text).marker is None
    ]
    while wanted:
        name = canonicalize_name(wanted.pop())
        if name in found:
            continue
        found[name] = distribution = importlib.metadata.distribution(name)
        for text in distribution.requires or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                wanted.append(requirement.name)
    return found


def _link_core_dependencies(into: Path) -> Path:
    """A directory of links to the core dependencies' installed files (packages, modules
    and ``.dist-info``)."""
    into.mkdir()
    for distribution in _core_distributions().values():
        assert distribution.files is not None, f"{distribution.name} has no RECORD"
        for top in {file.parts[0] for file in distribution.files} - {"..", "__pycache__"}:
            link = into / top
            if not link.exists():
                link.symlink_to(Path(distribution.locate_file(top)))
    return into


def _user_env(venv: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in OUTER_VARIABLES}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    base = tmp_path_factory.mktemp("install")
    wheel = _build_wheel(base)
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (site,) = venv.glob("lib/python*/site-packages")
    (site / "rmqsim-core-deps.pth").write_text(f"{_link_core_dependencies(base / 'deps')}\n")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
         "--no-index", "--no-cache-dir", str(wheel)],
        capture_output=True, text=True, timeout=TIMEOUT_S, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    yield Installed(wheel, venv, _user_env(venv))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of the user project, outside the checkout."""
    copy = tmp_path / "project"
    shutil.copytree(PROJECT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def test_the_wheel_holds_one_package_of_real_files_with_the_templates(
    installed: Installed,
) -> None:
    with zipfile.ZipFile(installed.wheel) as wheel:
        entries = wheel.infolist()
    names = [entry.filename for entry in entries]
    assert {name.partition("/")[0] for name in names} == {"rmqsim", f"rmqsim-{VERSION}.dist-info"}
    assert [name for name in names if not name.startswith(("rmqsim/", "rmqsim-"))] == []
    links = [e.filename for e in entries if stat.S_ISLNK(e.external_attr >> 16)]
    assert links == []
    for folder in LEGACY_PACKAGES:
        assert f"rmqsim/{folder}/__init__.py" in names
    assert "rmqsim/reports/templates/report.html" in names
    assert "rmqsim/reports/log4j2.properties" in names


def test_the_installed_rmqsim_is_the_wheel_not_the_checkout(
    installed: Installed, project: Path
) -> None:
    script = "import rmqsim, rmqsim.conformance.cli as c; print(rmqsim.__file__); print(c.__file__)"
    done = installed.run(project, "python", "-c", script)
    assert done.returncode == 0, done.stderr
    for line in done.stdout.splitlines():
        assert Path(line).is_relative_to(installed.venv / "lib"), line
        assert not Path(line).resolve().is_relative_to(ROOT), line


def test_the_installed_gate_runs_in_a_user_project(installed: Installed, project: Path) -> None:
    """The installed ``rmqsim gate`` with two worker processes (which import the installed
    copy) passes our queue and exits 0, every run and the crash sweep done: also
    tests/test_gate_parallel.py's passing parallel gate."""
    (project / "corpus").mkdir()
    done = installed.run(
        project, "rmqsim", "gate", "--profiles", "smoke,consumer", "--seeds", "0:3",
        "--jobs", "2", "--corpus", "corpus", "--out", "out",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "rmqsim gate: PASS" in done.stdout
    assert (project / "out" / "junit.xml").is_file()
    summary = json.loads((project / "out" / "summary.json").read_text())
    assert {name: p["runs"] for name, p in summary["profiles"].items()} == {
        "smoke": 3,
        "consumer": 3,
    }
    assert list(summary["crash_sweep"]) == ["smoke"]


def test_the_core_install_names_the_extra_for_a_sweep(installed: Installed, project: Path) -> None:
    done = installed.run(project, "rmqsim", "sweep", "--profiles", "smoke")
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip().endswith(f"({SPARK_EXTRA_INSTALL})")
    assert "Traceback" not in done.stderr


def test_the_user_projects_pytest_runs_with_the_plugin(installed: Installed, project: Path) -> None:
    done = installed.run(project, "python", "-m", "pytest", "-v")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "plugins: " in done.stdout and f"rmqsim-{VERSION}" in done.stdout
    assert "test_conformance[smoke] PASSED" in done.stdout
    assert "3 passed" in done.stdout


def _bare_imports(path: Path) -> list[str]:
    """``import model`` or ``from conformance.x import y`` in ``path``: rmqsim's folders
    by the names they have only in the source tree."""
    tree = ast.parse(path.read_text(), str(path))
    return [f"{path}:{line}: {name}" for line, name in imported_modules(tree)
            if name.split(".")[0] in LEGACY_PACKAGES]


def test_no_module_imports_rmqsims_folders_by_their_bare_names() -> None:
    folders = (*sorted(LEGACY_PACKAGES), "tests", "scripts")
    files = [p for folder in folders for p in sorted((ROOT / folder).rglob("*.py"))]
    files = [p for p in files if not p.is_relative_to(PROJECT)]
    assert len(files) > 100
    assert [found for path in files for found in _bare_imports(path)] == []


#: What importing the plugin may add besides the standard library: the plugin and the
#: packages it lives in (their ``__init__`` modules import nothing else of rmqsim but the
#: old import paths' aliases, ``rmqsim.moved``, which imports only the standard library).
PLUGIN_MODULES = {"rmqsim", "rmqsim.moved", "rmqsim.conformance",
                  "rmqsim.conformance.pytest_plugin"}
#: Prints the modules that importing the plugin adds to a process that has pytest.
MEASURE_IMPORT = """
import json, sys
import pytest
before = set(sys.modules)
import rmqsim.conformance.pytest_plugin
print(json.dumps(sorted(set(sys.modules) - before)))
"""
#: A project's conftest that writes the modules its pytest run has loaded, at its end.
MODULES_AT_END = """
import json, sys

def pytest_sessionfinish(session):
    with open("modules.json", "w") as out:
        json.dump(sorted(sys.modules), out)
"""


def _beyond_the_standard_library(modules: set[str]) -> set[str]:
    return {name for name in modules if name.partition(".")[0] not in sys.stdlib_module_names}


def test_importing_the_plugin_imports_nothing_heavy(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", MEASURE_IMPORT],
        cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT_S, check=True,
    )  # fmt: skip
    added = set(json.loads(done.stdout))
    assert "rmqsim.conformance.pytest_plugin" in added
    assert _beyond_the_standard_library(added) == PLUGIN_MODULES


def _modules_of_a_pytest_run(project: Path, *args: str) -> set[str]:
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=project, capture_output=True, text=True, timeout=TIMEOUT_S, check=True,
    )  # fmt: skip
    return set(json.loads((project / "modules.json").read_text()))


def test_a_pytest_run_that_does_not_use_the_fixture_loads_only_the_plugin(
    tmp_path: Path,
) -> None:
    (tmp_path / "conftest.py").write_text(MODULES_AT_END)
    (tmp_path / "test_plain.py").write_text("def test_plain():\n    assert True\n")
    with_plugin = _modules_of_a_pytest_run(tmp_path)
    without_plugin = _modules_of_a_pytest_run(tmp_path, "-p", "no:rmqsim")
    assert "rmqsim.conformance.pytest_plugin" not in without_plugin
    assert _beyond_the_standard_library(with_plugin - without_plugin) == PLUGIN_MODULES
