"""The storage layer's lockstep (a ``layer.LayerLockstep``): the model
(``model.store.ReferenceStore``) and the store under test, fed the same steps of
``scenarios.store.sim``. Deterministic answers (a put's offset, ``offsets``, errors) must
be equal; where the contract allows a choice (how many bodies a get returns, how far
retention goes, what an ``async`` crash keeps) the store's answer is judged by
``conformance.store.check`` and, when allowed, the model goes on from it (``adopt``), and
the trace records it. After each crash and each clean reopen, and at the end, every queue
is read whole through the contract's own operations and judged.

``--impl`` names a storage-layer factory (``factory(path=, store_config=, clock=,
faults=[, fs=]) -> MessageStore``; ``commitlog-store`` is ours), or a protocol server
(``exec:``) whose ``hello`` says ``"layer": "store"``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rmqsim.conformance.adapter import BUILTIN_IMPLS, DEFAULT_IMPL, LAYER_FORMS, load_impl
from rmqsim.conformance.bad_impl import BadImplError
from rmqsim.conformance.layer import OperationCrashes, RunSpec
from rmqsim.conformance.reporting.anomalies import is_protocol_error
from rmqsim.conformance.running.apply import SUT_FAILURES, error_outcome, exception_text
from rmqsim.conformance.running.lockstep import Divergence, SimClock, Stats, StepRecord
from rmqsim.conformance.running.statediff import Difference
from rmqsim.conformance.running.watchdog import CallBound, OperationHang
from rmqsim.conformance.store.check import (
    QueueView,
    StoreViolation,
    check_clean,
    check_get,
    check_recovered,
    check_retained,
    observe,
)
from rmqsim.model.store.api import MessageStore, QueueKey, StoreConfig
from rmqsim.model.store.reference import ReferenceStore
from rmqsim.scenarios.queue.ops import Outcome, Step
from rmqsim.scenarios.store.ops import (
    CrashStore,
    Flush,
    Get,
    Offsets,
    Put,
    ReopenStore,
    Retain,
)
from rmqsim.scenarios.store.profiles import StoreProfile

__all__ = ["DEFAULT_STORE_IMPL", "StoreLockstep", "resolve_store_impl"]

DEFAULT_STORE_IMPL = BUILTIN_IMPLS["commitlog-store"]
_CONTRACT_METHODS = ("put", "get", "offsets", "flush", "retain", "close", "crash")


def resolve_store_impl(impl: Any) -> tuple[str, Callable[..., Any]]:
    """``(name, factory)`` of a storage-layer ``--impl`` (``adapter.load_impl``)."""
    loaded = load_impl(DEFAULT_STORE_IMPL if impl == DEFAULT_IMPL else impl)
    if loaded.layer != "store":
        raise BadImplError(
            f"--impl {loaded.name} is a {LAYER_FORMS[loaded.layer]} factory; a storage "
            "profile needs a message store factory(path=, store_config=, clock=, faults=)"
        )
    return loaded.name, loaded.factory


def _sut_outcome(call: Callable[[], Any]) -> tuple[Outcome, Any]:
    """``(outcome, raw value)`` of a call into the store; an error is its kind, anything
    else ``unexpected:``. ``OperationHang`` propagates."""
    try:
        raw = call()
    except OperationHang:
        raise
    except SUT_FAILURES as exc:
        return error_outcome(exc), None
    return Outcome(raw), raw


class StoreLockstep(OperationCrashes):
    """One storage run in progress: ``open``, ``execute`` steps, ``finish``, ``close``."""

    def __init__(self, spec: RunSpec, profile: StoreProfile, factory: Callable[..., Any],
                 root: Path) -> None:
        self.spec = spec
        self.profile = profile
        self.factory = factory
        self.path = root / "store"
        self.clock = SimClock()
        self.config = StoreConfig(**profile.store_config())
        self.model = ReferenceStore(self.config, self.clock)
        self.records: list[StepRecord] = []
        self.stats = Stats()
        self.sut: MessageStore | None = None
        self.open_failure: str | None = None
        self.exits = contextlib.ExitStack()
        self.bound = self.exits.enter_context(CallBound())
        self.step: Step[Any] | None = None

    # ------------------------------------------------------------------ opening

    def open(self) -> None:
        """Open the store on a fresh directory; a failure is reported at the first step."""
        try:
            self.sut = self._open_sut()
        except OperationHang as hang:
            self.open_failure = f"opening a fresh directory: {hang.detail}"
        except SUT_FAILURES as exc:
            self.open_failure = (f"opening a fresh directory raised {type(exc).__name__}: "
                                 f"{exception_text(exc)}")

    def _open_sut(self) -> MessageStore:
        store = self.bound.call("open", lambda: self.factory(
            path=self.path, store_config=self.config, clock=self.clock, faults=None))
        missing = [name for name in _CONTRACT_METHODS if not callable(getattr(store, name, None))]
        if missing:
            raise TypeError(f"the factory returned a {type(store).__name__}, which lacks "
                            f"{', '.join(missing)}")
        checked: MessageStore = store
        return checked

    def _reopen(self, why: str) -> MessageStore:
        try:
            self.sut = self._open_sut()
        except OperationHang as hang:
            self.sut = None
            self._fail("hang", f"reopening after {why}: {hang.detail}")
        except SUT_FAILURES as exc:
            self.sut = None
            self._fail("unrecoverable", f"reopening after {why} raised {type(exc).__name__}: "
                       f"{exception_text(exc)[:300]}")
        self.stats.reopens += 1
        return self._sut()

    # ------------------------------------------------------------------ steps

    def execute(self, step: Step[Any]) -> Outcome:
        self.stats.steps += 1
        self.stats.op_counts[step.op.kind] += 1
        self.clock.now_s = step.time_s
        self.step = step
        try:
            if self.sut is None:
                self._fail("unrecoverable", self.open_failure or "the store is not open")
            outcome = self._apply(step.op)
        except Divergence:
            if not self.records or self.records[-1].step is not step:
                self.records.append(StepRecord(step, None))
            raise
        except (Exception, OperationHang) as exc:
            self.records.append(StepRecord(step, None))
            raise _divergence(exc, self.stats.steps, step) from None
        self.records.append(StepRecord(step, outcome))
        return outcome

    def _apply(self, op: Any) -> Outcome:
        if isinstance(op, Put):
            return self._put(op)
        if isinstance(op, Get):
            return self._get(op)
        if isinstance(op, Offsets):
            return self._offsets(op)
        if isinstance(op, Flush):
            return self._same("flush", self.model.flush, self._sut().flush)
        if isinstance(op, Retain):
            return self._retain(op)
        if isinstance(op, CrashStore):
            return self._crash(op)
        assert isinstance(op, ReopenStore), op
        return self._reopen_clean()

    def _sut(self) -> MessageStore:
        assert self.sut is not None, "execute() stops at a store that is not open"
        return self.sut

    def _call(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        return self.bound.call(what, fn, *args)

    def _same(self, what: str, model_call: Callable[[], Any], sut_call: Callable[[], Any],
              anomaly: str = "outcome-mismatch") -> Outcome:
        """Both answer, and must answer alike (a value or an error kind)."""
        want, _ = _sut_outcome(model_call)
        got, _ = _sut_outcome(lambda: self._call(what, sut_call))
        if isinstance(got.value, list):
            got = Outcome(tuple(got.value))
        if got != want:
            self._mismatch(anomaly if want.error is None and got.error is None
                           else "outcome-mismatch", want, got)
        return want

    def _mismatch(self, anomaly: str, want: Outcome, got: Outcome, detail: str = "") -> None:
        assert self.step is not None
        if is_protocol_error(got.error):
            anomaly = "protocol-error"
        self.records.append(StepRecord(self.step, want, sut_outcome=got))
        raise Divergence(anomaly, self.stats.steps, self.step, want, got,
                         detail=detail or f"model={want} store={got}")

    def _fail(self, anomaly: str, detail: str, diffs: list[Difference] | None = None) -> Any:
        assert self.step is not None
        raise Divergence(anomaly, self.stats.steps, self.step, diffs=diffs or [], detail=detail)

    def _put(self, op: Put) -> Outcome:
        sut = self._sut()
        return self._same("put", lambda: self.model.put(op.topic, op.queue, op.bodies),
                          lambda: sut.put(op.topic, op.queue, list(op.bodies)),
                          "offset-mismatch")

    def _offsets(self, op: Offsets) -> Outcome:
        sut = self._sut()
        return self._same("offsets", lambda: self.model.offsets(op.topic, op.queue),
                          lambda: tuple(sut.offsets(op.topic, op.queue)), "offset-mismatch")

    def _get(self, op: Get) -> Outcome:
        sut = self._sut()
        want, full = _sut_outcome(lambda: self.model.get(op.topic, op.queue, op.offset,
                                                         op.max_count))
        got, raw = _sut_outcome(lambda: self._call(
            "get", sut.get, op.topic, op.queue, op.offset, op.max_count))
        if want.error is not None or got.error is not None:
            if got != want:
                self._mismatch("outcome-mismatch", want, got)
            return want
        why = check_get(full, raw, op.max_count)
        accepted = Outcome(tuple(raw)) if type(raw) is list else Outcome(repr(raw)[:200])
        if why is not None:
            self._mismatch("get-mismatch", Outcome(tuple(full)), accepted, why)
        return accepted

    # ------------------------------------------------------------------ retention, crashes

    def _bounds(self) -> dict[QueueKey, tuple[int, int]]:
        sut = self._sut()
        return {key: _pair(self._call("offsets", sut.offsets, *key))
                for key in self.model.queue_keys()}

    def _retain(self, op: Retain) -> Outcome:
        sut = self._sut()
        got, _ = _sut_outcome(lambda: self._call("retain", sut.retain, op.cutoff_s))
        if got != Outcome(None):
            self._mismatch("outcome-mismatch", Outcome(None), got)
        bounds = self._bounds()
        check_retained(self.model, op.cutoff_s, bounds)
        self.model.allow_retention(op.cutoff_s)
        for key, (low, high) in bounds.items():
            self.model.adopt(key, low, high)
        return Outcome(tuple((key[0], key[1], low) for key, (low, _) in bounds.items()))

    def _observe(self) -> dict[QueueKey, QueueView]:
        return observe(self._sut(), self.model.queue_keys(), self._call)

    def _crash_and_reopen(self) -> dict[QueueKey, QueueView]:
        sut = self._sut()
        got, _ = _sut_outcome(lambda: self._call("crash", sut.crash))
        if got.error is not None:
            self._mismatch("outcome-mismatch", Outcome(None), got)
        self.stats.crashes_injected += 1
        self._reopen("a crash")
        return self._observe()

    def _crash(self, op: CrashStore) -> Outcome:
        views = self._crash_and_reopen()
        check_recovered(self.model, views)
        if op.twice:
            again = self._crash_and_reopen()
            if again != views:
                changed = [key for key in views if views[key] != again.get(key)]
                key = changed[0]
                diff = Difference("recovered", f"{key[0]}/{key[1]}", _summary(views[key]),
                                  _summary(again[key]))
                self._fail("recovery-unstable", f"{key[0]}/{key[1]}: the second recovery "
                           "changed the first one's state", [diff])
        for key, view in views.items():
            self.model.adopt(key, view.min_offset, view.max_offset)
        return Outcome(tuple((key[0], key[1], view.min_offset, view.max_offset)
                             for key, view in views.items()))

    def _reopen_clean(self) -> Outcome:
        sut = self._sut()
        got, _ = _sut_outcome(lambda: self._call("close", sut.close))
        if got.error is not None:
            self._mismatch("outcome-mismatch", Outcome(None), got)
        self.model.flush()  # a clean close keeps everything, durably
        self._reopen("a clean close")
        views = self._observe()
        check_clean(self.model, views, "lost-on-close")
        return Outcome(None)

    # ------------------------------------------------------------------ the end

    def finish(self) -> None:
        """Every queue read whole equals the model's."""
        if self.sut is None or self.step is None:
            return
        self.stats.full_checks += 1
        try:
            check_clean(self.model, self._observe(), "offset-mismatch")
        except (Exception, OperationHang) as exc:
            raise _divergence(exc, self.stats.steps, self.step, "at the end: ") from None

    def close(self) -> None:
        try:
            if self.sut is not None:
                with contextlib.suppress(OperationHang, Exception):
                    self.bound.call("crash", self.sut.crash)
        finally:
            self.exits.close()

    def state_digest(self) -> str:
        state = {f"{t}/{q}": [log.min_offset, log.max_offset,
                              hashlib.sha256(b"".join(log.bodies)).hexdigest()]
                 for (t, q), log in sorted(self.model.queues.items())}
        text = json.dumps(state, sort_keys=True, separators=(",", ":"))
        return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def _divergence(exc: BaseException, index: int, step: Step[Any], where: str = "") -> Divergence:
    """The divergence a check's exception is: a violation, a hang, or the store raising
    while it was read back (an answer outside the contract)."""
    if isinstance(exc, StoreViolation):
        return Divergence(exc.anomaly, index, step, diffs=exc.diffs, detail=where + exc.detail)
    if isinstance(exc, OperationHang):
        return Divergence("hang", index, step, detail=where + exc.detail)
    if type(exc).__name__ == "WireProtocolError":
        return Divergence("protocol-error", index, step, detail=where + exception_text(exc))
    return Divergence("outcome-mismatch", index, step, detail=(
        f"{where}the store raised {type(exc).__name__}: {exception_text(exc)[:300]}"))


def _pair(value: object) -> tuple[int, int]:
    """``offsets()``'s answer: two ints (a list is taken: it came over a wire)."""
    if isinstance(value, tuple | list) and len(value) == 2:
        low, high = value
        if type(low) is int and type(high) is int:
            return (low, high)
    raise TypeError(f"offsets() returned {value!r:.80}, not (min, max)")


def _summary(view: QueueView) -> str:
    return f"[{view.min_offset}, {view.max_offset}) serving {len(view.bodies)}"
