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

The plugin is inert unless a test asks for the ``rmqsim_gate`` fixture: it adds no test,
and it imports nothing of rmqsim until then (this module imports only pytest), so a
project that does not use it pays nothing.
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
    "pytest_configure",
    "pytest_generate_tests",
    "rmqsim_gate",
]

FIXTURE = "rmqsim_gate"
#: The parameter id of the regression corpus replay.
CORPUS_ITEM = "regressions"


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


def _marker_kwargs(definition: Any) -> dict[str, Any]:
    marker = definition.get_closest_marker(FIXTURE) if definition is not None else None
    return dict(marker.kwargs) if marker is not None else {}


def _impl(config: pytest.Config, kwargs: dict[str, Any]) -> Any:
    """The implementation: ``--rmqsim-impl``, else the marker's, else ours."""
    from rmqsim.conformance.adapter import DEFAULT_IMPL

    return config.getoption("--rmqsim-impl") or kwargs.get("impl") or DEFAULT_IMPL


def _layer_profiles(impl: Any) -> list[str]:
    """The gate profiles of ``impl``'s layer: the queue's for a queue or a storage backend,
    the consumer's or the streams' for a push consumer or a stream factory."""
    from rmqsim.conformance.adapter import QUEUE_LAYERS, BadImplError, load_impl
    from rmqsim.conformance.running.gate import GATE_PROFILES, gate_profiles_for

    try:
        layer = load_impl(impl).layer
    except BadImplError as exc:
        raise pytest.UsageError(f"--rmqsim-impl: {exc}") from None
    return list(GATE_PROFILES if layer in QUEUE_LAYERS else gate_profiles_for(layer))


def _profiles(config: pytest.Config, kwargs: dict[str, Any]) -> list[str]:
    """Profiles from ``--rmqsim-profile`` (each may be a comma list), else the marker's,
    else the gate profiles of the implementation's layer; each checked now so that a typo
    is a usage error, not a failure."""
    from rmqsim.scenarios.catalog import get_profile
    from rmqsim.scenarios.queue.profiles import ProfileError

    given = config.getoption("--rmqsim-profile")
    if given:
        names = [name.strip() for item in given for name in item.split(",") if name.strip()]
    else:
        marked = kwargs.get("profiles")
        names = [marked] if isinstance(marked, str) else list(marked or [])
        names = names or _layer_profiles(_impl(config, kwargs))
    for name in names:
        try:
            get_profile(name)
        except ProfileError as exc:
            raise pytest.UsageError(f"--rmqsim-profile: {exc}") from None
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

        try:
            gate = self.run()
        except BadImplError as exc:
            pytest.fail(f"rmqsim: {exc}", pytrace=False)
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
    from rmqsim.conformance.cli.common import SEEDS
    from rmqsim.conformance.running.corpus import DEFAULT_CORPUS
    from rmqsim.conformance.running.gate import DEFAULT_GATE_SEEDS

    config = request.config
    kwargs = _marker_kwargs(request.node)
    impl = _impl(config, kwargs)
    seeds_text = config.getoption("--rmqsim-seeds") or kwargs.get("seeds")
    try:
        seeds = SEEDS.convert(seeds_text, None, None) if seeds_text else DEFAULT_GATE_SEEDS
    except Exception as exc:  # click's BadParameter: say it the pytest way
        raise pytest.UsageError(f"--rmqsim-seeds: {exc}") from None
    out_text = config.getoption("--rmqsim-out")
    out = Path(out_text) if out_text else tmp_path_factory.mktemp("rmqsim")
    return GateCheck(
        profile=request.param,
        impl=impl,
        seeds=seeds,
        out=out,
        steps=kwargs.get("steps"),
        corpus=config.rootpath / DEFAULT_CORPUS,
    )
