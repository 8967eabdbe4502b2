"""pytest plugin: run rmqsim's conformance gate on your queue inside your own pytest.

Registered through the ``pytest11`` entry point, so installing rmqsim is enough. In your
tests::

    @pytest.mark.rmqsim_gate(impl="mymq_adapter:open_queue", seeds="0:5")  # optional
    def test_conformance(rmqsim_gate):
        rmqsim_gate.check()

The test runs once per gate profile (``test_conformance[smoke]``, ``[crashy]``, ...) plus
``[regressions]`` when ``<rootdir>/regressions`` holds a corpus; a failure shows rmqsim's
report and the command that reproduces it. Command-line options override the marker:
``--rmqsim-impl MOD:FACTORY``, ``--rmqsim-seeds A:B``, ``--rmqsim-profile NAME`` (repeatable
or a comma list), ``--rmqsim-out DIR`` (failing traces; default: pytest's temp dir).

Bad input is pytest's usage error (exit 4, one ``ERROR:`` line) before any test runs: the
options given are checked in ``pytest_configure`` (``--rmqsim-out`` is created there); an
implementation whose module is not found yet is loaded again once collection has put the
test directories on ``sys.path`` (``pytest_collection_modifyitems``), as is every gate
item's implementation.

The plugin is inert unless a test asks for the ``rmqsim_gate`` fixture or an ``--rmqsim-*``
option is given: it adds no test, and it imports nothing of rmqsim until then (this module
imports only pytest), so a project that does not use it pays nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

__all__ = [
    "CORPUS_ITEM",
    "FIXTURE",
    "GateCheck",
    "pytest_addoption",
    "pytest_collection_modifyitems",
    "pytest_configure",
    "pytest_generate_tests",
    "rmqsim_gate",
]

FIXTURE = "rmqsim_gate"
#: The parameter id of the regression corpus replay.
CORPUS_ITEM = "regressions"
#: Why each implementation (by ``_impl_key``) cannot be used, None when it can: loaded once
#: per run, whatever the number of items that check it.
_IMPL_PROBLEMS = pytest.StashKey[dict[str, str | None]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("rmqsim", "rmqsim conformance gate (the rmqsim_gate fixture)")
    group.addoption(
        "--rmqsim-impl",
        default=None,
        metavar="MOD:FACTORY",
        help="implementation the rmqsim_gate fixture checks (default: the marker's, else "
        "rmqsim's own)",
    )
    group.addoption("--rmqsim-seeds", default=None, metavar="A:B", help="seed range per profile")
    group.addoption(
        "--rmqsim-profile",
        action="append",
        default=None,
        metavar="NAME",
        help="gate profile(s) to run, repeatable or comma-separated (default: all)",
    )
    group.addoption(
        "--rmqsim-out", default=None, metavar="DIR", help="where failing traces are written"
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{FIXTURE}(impl=None, seeds=None, profiles=None, steps=None): defaults of the "
        "rmqsim conformance gate for this test (command-line options override them)",
    )
    config.stash[_IMPL_PROBLEMS] = {}
    if not config.getoption("help", False):
        _check_options(config)


def _check_options(config: pytest.Config) -> None:
    """The ``--rmqsim-*`` options given, checked before collection: a bad one is pytest's
    usage error (exit 4, one line), not an error of every gate item. Options not given are
    not looked at, so that a run without them imports nothing of rmqsim."""
    seeds = config.getoption("--rmqsim-seeds")
    if seeds is not None:
        _seed_range(seeds, "--rmqsim-seeds")
    _option_profiles(config)
    out = config.getoption("--rmqsim-out")
    if out is not None:
        _check_out(out)
    impl = config.getoption("--rmqsim-impl")
    if impl is not None:
        problem = _impl_problem(config, impl)
        if problem is not None and _module_found(impl):
            raise pytest.UsageError(_named_by_option(problem))
        # A module not found now may be found once pytest has put the test directories on
        # sys.path (an adapter beside the tests): pytest_collection_modifyitems loads it again.
        config.stash[_IMPL_PROBLEMS].pop(_impl_key(impl), None)


def _seed_range(text: str, where: str) -> range:
    """``A:B`` or ``S``, as the CLI's ``--seeds`` reads it; else a usage error."""
    import click

    from rmqsim.conformance.cli.common import SEEDS

    try:
        return SEEDS.convert(text, None, None)
    except click.ClickException as exc:  # click's BadParameter: say it the pytest way
        raise pytest.UsageError(f"{where}: {exc.message}") from None


def _check_out(text: str) -> None:
    """``--rmqsim-out``: created now and writable (as the CLI's ``--out``), so that a bad
    directory is a usage error, not a traceback of the first failing run's trace."""
    from rmqsim.conformance.running.scratch import unwritable_dir

    if not text.strip():
        raise pytest.UsageError("--rmqsim-out is empty: name a directory, or leave it out")
    problem = unwritable_dir(Path(text))
    if problem is not None:
        raise pytest.UsageError(f"--rmqsim-out {problem}")


def _impl_key(impl: Any) -> str:
    return impl if isinstance(impl, str) else repr(impl)


def _impl_problem(config: pytest.Config, impl: Any) -> str | None:
    """Why ``impl`` (an ``--impl`` string or a factory) cannot be loaded (``BadImplError``'s
    one line), or None; remembered for the run."""
    problems = config.stash.setdefault(_IMPL_PROBLEMS, {})
    key = _impl_key(impl)
    if key not in problems:
        from rmqsim.conformance.adapter import BadImplError, resolve_impl

        try:
            resolve_impl(impl)
            problems[key] = None
        except BadImplError as exc:
            problems[key] = str(exc)
    return problems[key]


def _module_found(impl: str) -> bool:
    """Whether ``impl`` names no module to import, or one whose top-level package is found
    now: then whatever is wrong with it stays wrong after collection."""
    import importlib.util

    from rmqsim.conformance.adapter import BUILTIN_IMPLS, EXTERNAL_DRIVERS
    from rmqsim.conformance.wire.client import is_exec_impl

    spec = BUILTIN_IMPLS.get(impl, impl)
    module, sep, attribute = spec.partition(":")
    if impl in EXTERNAL_DRIVERS or is_exec_impl(spec) or not (sep and module and attribute):
        return True
    try:
        return importlib.util.find_spec(module.partition(".")[0]) is not None
    except (ImportError, ValueError):
        return True


def _named_by_option(problem: str) -> str:
    """``BadImplError``'s line, which names ``--impl``, as said of ``--rmqsim-impl``."""
    rest = problem.removeprefix("--impl")
    return f"--rmqsim-impl{rest}" if rest != problem else f"--rmqsim-impl: {problem}"


def _impl_usage(config: pytest.Config, node: Any) -> str | None:
    """Why the implementation of the gate item ``node`` cannot be used, naming where it
    comes from (``--rmqsim-impl`` or the item's marker), or None."""
    kwargs = _marker_kwargs(node)
    impl = _impl(config, kwargs)
    problem = _impl_problem(config, impl)
    if problem is None:
        return None
    if config.getoption("--rmqsim-impl"):
        return _named_by_option(problem)
    where = f"{FIXTURE} marker: " if kwargs.get("impl") else ""
    return f"{node.nodeid}: {where}{problem}"


def _marker_kwargs(definition: Any) -> dict[str, Any]:
    marker = definition.get_closest_marker(FIXTURE) if definition is not None else None
    return dict(marker.kwargs) if marker is not None else {}


def _impl(config: pytest.Config, kwargs: dict[str, Any]) -> Any:
    """The implementation: ``--rmqsim-impl``, else the marker's, else ours."""
    from rmqsim.conformance.adapter import DEFAULT_IMPL

    return config.getoption("--rmqsim-impl") or kwargs.get("impl") or DEFAULT_IMPL


def _layer_profiles(config: pytest.Config, impl: Any) -> list[str]:
    """The gate profiles of ``impl``'s layer: the queue's for a queue or a storage backend,
    the consumer's or the streams' for a push consumer or a stream factory. An ``impl``
    that does not load gets the queue's, and its problem is reported after collection
    (``pytest_collection_modifyitems``) rather than as an error of the test module."""
    from rmqsim.conformance.adapter import QUEUE_LAYERS, BadImplError, load_impl
    from rmqsim.conformance.running.gate import GATE_PROFILES, gate_profiles_for

    try:
        layer = load_impl(impl).layer
    except BadImplError as exc:
        config.stash.setdefault(_IMPL_PROBLEMS, {})[_impl_key(impl)] = str(exc)
        return list(GATE_PROFILES)
    return list(GATE_PROFILES if layer in QUEUE_LAYERS else gate_profiles_for(layer))


def _option_profiles(config: pytest.Config) -> list[str]:
    """``--rmqsim-profile`` (each may be a comma list; [] when not given), each name
    checked so that a typo is a usage error naming the known profiles."""
    given = config.getoption("--rmqsim-profile") or []
    names = [name.strip() for item in given for name in item.split(",") if name.strip()]
    if given and not names:
        raise pytest.UsageError(f"--rmqsim-profile {' '.join(map(repr, given))} names no profile")
    _check_profiles(names, "--rmqsim-profile")
    return names


def _check_profiles(names: list[str], where: str) -> None:
    if not names:
        return
    from rmqsim.scenarios.catalog import get_profile
    from rmqsim.scenarios.queue.profiles import ProfileError

    for name in names:
        try:
            get_profile(name)
        except ProfileError as exc:
            raise pytest.UsageError(f"{where}: {exc}") from None


def _profiles(config: pytest.Config, kwargs: dict[str, Any]) -> list[str]:
    """Profiles from ``--rmqsim-profile``, else the marker's, else the gate profiles of the
    implementation's layer; each checked now so that a typo is a usage error, not a
    failure."""
    names = _option_profiles(config)
    if not names:
        marked = kwargs.get("profiles")
        names = [marked] if isinstance(marked, str) else list(marked or [])
        _check_profiles(names, f"{FIXTURE} marker profiles")
        names = names or _layer_profiles(config, _impl(config, kwargs))
    return names


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """One test item per profile (and one for the corpus) for a test using the fixture."""
    if FIXTURE not in metafunc.fixturenames:
        return
    from rmqsim.conformance.running.corpus import DEFAULT_CORPUS, corpus_files

    names = _profiles(metafunc.config, _marker_kwargs(metafunc.definition))
    if corpus_files(metafunc.config.rootpath / DEFAULT_CORPUS):
        names.append(CORPUS_ITEM)
    metafunc.parametrize(FIXTURE, names, ids=names, indirect=True)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The implementation of every gate item left to run, loaded now that collection has put
    the test directories on ``sys.path``: one that cannot be used is a usage error before any
    test runs. An xdist worker leaves it to the items (the fixture fails each with the same
    line): a worker's usage error would be an internal error of xdist's."""
    if hasattr(config, "workerinput"):
        return
    for item in items:
        if FIXTURE in getattr(item, "fixturenames", ()):
            problem = _impl_usage(config, item)
            if problem is not None:
                raise pytest.UsageError(problem)


@dataclass(slots=True)
class GateCheck:
    """One profile of the gate (or the corpus replay) for one test item."""

    profile: str
    impl: Any
    seeds: range
    out: Path
    steps: int | None = None
    corpus: Path | None = None

    def run(self) -> Any:
        """Run it and return the ``conformance.running.gate.GateResult``."""
        from rmqsim.conformance.adapter import resolve_impl
        from rmqsim.conformance.running.gate import GatePlan, GateResult, run_corpus, run_profiles

        if self.profile == CORPUS_ITEM:
            assert self.corpus is not None
            gate = GateResult(impl=resolve_impl(self.impl)[0], seeds=self.seeds)
            run_corpus(gate, self.corpus, impl=self.impl)
            return gate
        return run_profiles(GatePlan((self.profile,), self.seeds, self.impl, self.out, self.steps))

    def check(self) -> Any:
        """Run it; fail the test with rmqsim's report when anything diverges."""
        from rmqsim.conformance.adapter import BadImplError
        from rmqsim.conformance.reporting.report import render_failure

        problem: str | None = None
        try:
            gate = self.run()
        except BadImplError as exc:
            problem = str(exc)
        if problem is not None:  # failed outside the handler: no "During handling ..." chain
            pytest.fail(f"rmqsim: {problem}", pytrace=False)
        if not gate.ok:
            shown = gate.failures[:3]
            reports = "\n\n".join(render_failure(result) for result in shown)
            more = len(gate.failures) - len(shown)
            tail = f"\n\n(and {more} more failing runs)" if more > 0 else ""
            pytest.fail(
                f"rmqsim gate {self.profile}: {len(gate.failures)} failing run(s)\n\n"
                f"{reports}{tail}",
                pytrace=False,
            )
        return gate


@pytest.fixture
def rmqsim_gate(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The gate for this item's profile; call ``.check()`` (or ``.run()`` to inspect)."""
    from rmqsim.conformance.running.corpus import DEFAULT_CORPUS
    from rmqsim.conformance.running.gate import DEFAULT_GATE_SEEDS

    config = request.config
    problem = _impl_usage(config, request.node)
    if problem is not None:  # an xdist worker's item (others stopped after collection)
        pytest.fail(f"rmqsim: {problem}", pytrace=False)
    kwargs = _marker_kwargs(request.node)
    option = config.getoption("--rmqsim-seeds")
    seeds_text = option or kwargs.get("seeds")
    where = "--rmqsim-seeds" if option else f"{FIXTURE} marker seeds"
    seeds = _seed_range(seeds_text, where) if seeds_text else DEFAULT_GATE_SEEDS
    out_text = config.getoption("--rmqsim-out")
    out = Path(out_text) if out_text else tmp_path_factory.mktemp("rmqsim")
    return GateCheck(
        profile=request.param,
        impl=_impl(config, kwargs),
        seeds=seeds,
        out=out,
        steps=kwargs.get("steps"),
        corpus=config.rootpath / DEFAULT_CORPUS,
    )
