"""Known deviations as data: ``--expect PROFILE`` (docs/FINDINGS.md "Deviation list").

A real system may knowingly differ from SPEC (SPEC marks Milvus's differences "[Milvus:
...]"). A deviation profile lists them, each with the SPEC section it departs from, the
upstream issue, why, and how its divergence shows: the anomaly names it can carry, the
operations it happens in, and optionally a pattern its report must contain. A failing
run whose divergence matches a listed deviation is an *expected* outcome: counted by
name, listed in the gate's summary, and not a failure; every other divergence still
fails. A run stops at its first divergence, so an expected one ends that run's checking:
the summary says how many runs ended so.

The file is TOML::

    [[deviation]]
    name = "positions-in-memory"
    spec = "Durability, crash and recovery"
    issue = ""                       # upstream issue or PR, if any
    why = "groups and positions live in memory only"
    kind = "intended"                # SPEC marks it; "finding": found here, reported upstream
    anomalies = ["torn-operation", "lost-write", "position-mismatch"]
    operations = []                  # the diverging step's op kinds; empty: any
    pattern = ""                     # a regex an outcome's report must hold (no state diff)
    every_diff = "^group .*sut='absent'"   # a regex every state difference must match
    # (each difference is written "AREA WHERE: model=REPR sut=REPR", unabridged)

``--expect milvus`` (or ``rocketmq-store``) names the profile kept beside a driver of
``EXTERNAL_DRIVERS``; any other value is a path. A failing power-cut case of a power-loss
sweep matches a deviation too (``DeviationProfile.match_power``): its operation is
``power-cut``, its report ``MODE CALL PATH: PROBLEM``.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmqsim.conformance.bad_impl import BadImplError

__all__ = ["DRIVER_PROFILES", "Deviation", "DeviationProfile", "load_profile"]

#: ``--expect NAME`` for the drivers of real systems: the file beside the driver, under
#: the ``impl`` package.
DRIVER_PROFILES = {"milvus": "external/milvus_rocksmq/deviations.toml",
                   "rocketmq-store": "external/rocketmq_store/deviations.toml"}


@dataclass(frozen=True)
class Deviation:
    name: str
    spec: str
    issue: str
    why: str
    anomalies: tuple[str, ...]
    operations: tuple[str, ...] = ()
    pattern: str = ""
    every_diff: str = ""
    kind: str = "intended"

    def matches(self, divergence: Any) -> bool:
        """Whether ``divergence`` is this deviation: its anomaly and operation are listed;
        a state comparison's every difference matches ``every_diff`` (so a real loss beside
        a known one still fails); an outcome's or a crash's report holds ``pattern``."""
        if divergence.anomaly not in self.anomalies:
            return False
        if self.operations and divergence.step.op.kind not in self.operations:
            return False
        diffs = [
            f"{d.area} {d.where}: model={d.expected!r} sut={d.actual!r}"
            for d in divergence.diffs
        ]
        if diffs:
            return all(re.search(self.every_diff, line) for line in diffs)
        said = f"{divergence.detail} {divergence.expected} {divergence.actual}"
        return re.search(self.pattern, said) is not None


@dataclass
class DeviationProfile:
    """The deviations of one system, and how often each was seen."""

    path: Path
    deviations: tuple[Deviation, ...]

    def match(self, result: Any) -> Deviation | None:
        """The listed deviation a failing ``RunResult`` shows, or None (a real failure)."""
        divergence = getattr(result, "divergence", None)
        if divergence is None:
            return None
        return next((d for d in self.deviations if d.matches(divergence)), None)

    def match_power(self, failure: Any) -> Deviation | None:
        """The listed deviation a failing power-cut case (``power_loss.PowerFailure``)
        shows, or None: its anomaly is its problem's first word, its operation
        ``power-cut``, and its report its mode, the call cut and the problem."""
        case = failure.case
        shim = _PowerDivergence(
            anomaly=failure.problem.partition(":")[0],
            step=_PowerStep(_PowerOp()),
            detail=f"{case.mode} {case.point.call} {case.point.path}: {failure.problem}",
        )
        return next((d for d in self.deviations if d.matches(shim)), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "profile": str(self.path),
            "listed": [
                {"name": d.name, "kind": d.kind, "spec": d.spec, "issue": d.issue, "why": d.why}
                for d in self.deviations
            ],
        }


@dataclass(frozen=True)
class _PowerOp:
    kind: str = "power-cut"


@dataclass(frozen=True)
class _PowerStep:
    op: _PowerOp


@dataclass(frozen=True)
class _PowerDivergence:
    """A failing power-cut case as ``Deviation.matches`` reads a divergence."""

    anomaly: str
    step: _PowerStep
    detail: str
    diffs: tuple[Any, ...] = ()
    expected: str = ""
    actual: str = ""


def _text(entry: dict[str, Any], key: str, where: str, default: str | None = None) -> str:
    value = entry.get(key, default)
    if not isinstance(value, str):
        raise BadImplError(f"{where}: {key} must be a string")
    return value


def _names(entry: dict[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = entry.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise BadImplError(f"{where}: {key} must be a list of strings")
    return tuple(value)


def _deviation(entry: object, where: str) -> Deviation:
    if not isinstance(entry, dict):
        raise BadImplError(f"{where}: expected a table")
    deviation = Deviation(
        name=_text(entry, "name", where),
        spec=_text(entry, "spec", where),
        issue=_text(entry, "issue", where, ""),
        why=_text(entry, "why", where),
        anomalies=_names(entry, "anomalies", where),
        operations=_names(entry, "operations", where),
        pattern=_text(entry, "pattern", where, ""),
        every_diff=_text(entry, "every_diff", where, ""),
        kind=_text(entry, "kind", where, "intended"),
    )
    if not deviation.anomalies:
        raise BadImplError(f"{where}: a deviation names at least one anomaly")
    if deviation.kind not in ("intended", "finding"):
        raise BadImplError(f"{where}: kind must be 'intended' or 'finding'")
    for regex in (deviation.pattern, deviation.every_diff):
        try:
            re.compile(regex)
        except re.error as exc:
            raise BadImplError(f"{where}: {regex!r}: {exc}") from None
    return deviation


def load_profile(name: str) -> DeviationProfile:
    """The profile ``--expect name`` names; a missing or malformed file is bad input."""
    path = Path(name)
    if name in DRIVER_PROFILES:
        import rmqsim.impl

        path = Path(rmqsim.impl.__file__).resolve().parent / DRIVER_PROFILES[name]
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise BadImplError(f"--expect {name}: cannot read {path}: {exc}") from None
    entries = data.get("deviation")
    if not isinstance(entries, list) or not entries:
        raise BadImplError(f"--expect {name}: {path} lists no [[deviation]]")
    deviations = tuple(_deviation(e, f"{path} deviation {i + 1}") for i, e in enumerate(entries))
    names = [d.name for d in deviations]
    if len(set(names)) != len(names):
        raise BadImplError(f"--expect {name}: {path} lists a deviation name twice")
    return DeviationProfile(path, deviations)
