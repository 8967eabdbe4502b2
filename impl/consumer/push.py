"""``PushConsumer``: threads around a ``ConsumerCore``, as RocketMQ's push consumer.

One pull thread fills the process queues (flow control skips a queue over its limits), a
pool of worker threads takes batches and runs the handler outside the core's lock, and one
persist thread persists the committed offsets every ``config.persist_interval_s`` seconds of
the injected clock. ``close()`` stops and joins every thread, then persists; ``crash()``
stops and joins them and persists nothing (what a killed client leaves behind).

The handler returns a ``ConsumeResult``; an exception or any other value counts as a failure
(RETRY_LATER, or SUSPEND in orderly mode), as RocketMQ treats a throwing listener.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass

from rmqsim.impl.consumer.core import ConsumerCore, SendHook
from rmqsim.model.api import (
    Clock,
    ConsumeMode,
    ConsumerConfig,
    ConsumeResult,
    Delivered,
    InvalidArgumentError,
    MessageQueue,
)

__all__ = ["Handler", "PushConsumer", "PushOptions"]

_log = logging.getLogger(__name__)

#: The user's handler: a batch of messages in, a result out.
Handler = Callable[[tuple[Delivered, ...]], ConsumeResult]
#: How long an idle thread sleeps before looking again, in real seconds.
_IDLE_WAIT_S = 0.002
#: How long ``close``/``crash`` wait for each thread (a handler may be running).
_JOIN_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class PushOptions:
    """How a ``PushConsumer`` runs, beyond what it consumes: its number of worker threads,
    the hook its core calls before each send-back (``SendHook``; tests refuse sends
    through it) and the core class it wraps (a subclass can record what the core does)."""

    workers: int = 4
    send_hook: SendHook | None = None
    core_cls: type[ConsumerCore] = ConsumerCore


class PushConsumer:
    """Consume ``topic`` as ``group`` with ``handler`` on ``options.workers`` threads."""

    def __init__(
        self,
        queue: MessageQueue,
        *,
        group: str,
        topic: str,
        handler: Handler,
        path: str | os.PathLike[str],
        config: ConsumerConfig | None = None,
        clock: Clock,
        options: PushOptions = PushOptions(),
    ) -> None:
        if not callable(handler):
            raise InvalidArgumentError("handler must be callable")
        workers = options.workers
        if type(workers) is not int or workers < 1:
            raise InvalidArgumentError(f"workers must be an int >= 1, got {workers!r}")
        self.config = config or ConsumerConfig()
        self.core = options.core_cls.open(
            queue=queue,
            group=group,
            topic=topic,
            config=self.config,
            clock=clock,
            path=path,
            send_hook=options.send_hook,
        )
        self._handler = handler
        self._clock = clock
        self._failure = (
            ConsumeResult.SUSPEND
            if self.config.mode is ConsumeMode.ORDERLY
            else ConsumeResult.RETRY_LATER
        )
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._workers = workers
        #: Exceptions that stopped a thread (the queue closed under it, for instance).
        self.errors: list[BaseException] = []

    def start(self) -> dict[str, int]:
        """Read the persisted offsets and start the threads; returns the offsets read."""
        offsets = self.core.start()
        loops: list[tuple[str, Callable[[], None]]] = [("pull", self._pull_loop)]
        loops += [(f"worker-{i}", self._work_loop) for i in range(self._workers)]
        loops.append(("persist", self._persist_loop))
        for name, loop in loops:
            thread = threading.Thread(target=self._guarded, args=(loop,), name=name, daemon=True)
            self._threads.append(thread)
            thread.start()
        return offsets

    def _guarded(self, loop: Callable[[], None]) -> None:
        try:
            loop()
        except BaseException as exc:  # recorded for the owner; the other threads go on
            if not self._stop.is_set():
                _log.exception("push consumer thread stopped")
                self.errors.append(exc)

    def _pull_loop(self) -> None:
        while not self._stop.is_set():
            pulled = self.core.pull()
            if not any(pulled.values()):
                self._stop.wait(_IDLE_WAIT_S)

    def _work_loop(self) -> None:
        while not self._stop.is_set():
            batch = self.core.next_batch()
            if batch is None:
                self._stop.wait(_IDLE_WAIT_S)
                continue
            try:
                result = self._handler(batch.messages)
            except Exception:
                _log.debug("handler raised on batch %d", batch.seq, exc_info=True)
                result = self._failure
            if not isinstance(result, ConsumeResult) or result is self._wrong_result():
                result = self._failure
            self.core.complete(batch.seq, result)

    def _wrong_result(self) -> ConsumeResult:
        """The result the other mode uses (SUSPEND in concurrent mode and vice versa)."""
        if self.config.mode is ConsumeMode.ORDERLY:
            return ConsumeResult.RETRY_LATER
        return ConsumeResult.SUSPEND

    def _persist_loop(self) -> None:
        last_s = self._clock()
        while not self._stop.wait(_IDLE_WAIT_S):
            now_s = self._clock()
            if now_s - last_s >= self.config.persist_interval_s:
                self.core.persist()
                last_s = now_s

    def _join(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(_JOIN_TIMEOUT_S)
            if thread.is_alive():
                raise RuntimeError(f"consumer thread {thread.name} did not stop")
        self._threads.clear()

    def close(self) -> None:
        """Stop and join every thread, then persist and release the offset store."""
        self._join()
        self.core.close()

    def crash(self) -> None:
        """Stop and join every thread, persist nothing, release the offset store."""
        self._join()
        self.core.crash()
