"""The power-loss sweep's store as a child process, on a simulated disk through FUSE.

``FuseAccess`` is ``power_loss.DiskAccess`` for a store in another process: for each disk
the sweep opens a store on, it mounts the disk (``conformance.crashing.fuse_disk.mount_disk``) and
starts the store as a wire-protocol server (``conformance.wire``: the reference server
forked for a Python factory, ``--crash-mode process``'s way, or an ``exec:`` command for
any language) with its directory on the mount. The child opens the store with the OS
file system; every write, sync, creation and rename it makes reaches the disk through
FUSE and is numbered there, exactly as ``fs=`` numbers them in process.

The queue it returns is the wire queue, watched: when the disk lost power during a call
(the armed point fired), the child is killed at once, by the FUSE call that fired it
(``FuseMount.kill_at_cut``: a machine's processes end with its power, and nothing the
child would do after the cut reaches the dead disk or is used), and the call raises
``PowerCut``, as the disk raises it in process; a failed sync (``sync-error``)
reaches the child as the ``EIO`` of its ``fsync`` and the call answers whatever the child
makes of it. A child that does not answer within the wire protocol's bound is killed,
and the call fails naming the FUSE call it was inside, if any (``ChildHangError``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rmqsim.conformance.crashing.fuse_disk import (
    FuseMount,
    FuseMountError,
    fuse_available,
    mount_disk,
)
from rmqsim.conformance.crashing.quiet_server import serve_quietly
from rmqsim.conformance.crashing.simdisk import PowerCut, SimDisk
from rmqsim.conformance.running import procfs
from rmqsim.conformance.running.process_sut import process_factory
from rmqsim.conformance.running.watchdog import OperationHang
from rmqsim.model.api import Clock, MQConfig

__all__ = [
    "ChildHangError",
    "FuseAccess",
    "FuseUnavailableError",
    "process_cpu_s",
]

class FuseUnavailableError(Exception):
    """FUSE cannot be used here; the message says why (``fuse_available``)."""


class ChildHangError(RuntimeError):
    """The store's child did not answer within the bound (it was killed)."""


def process_cpu_s(pid: int) -> float:
    """CPU seconds (user and system) process ``pid`` has used so far; 0 when it is gone."""
    return procfs.cpu_s(pid) or 0.0


class _PoweredQueue:
    """A wire queue whose child writes to ``mount``: every call checks the power after."""

    def __init__(self, queue: Any, mount: FuseMount, access: FuseAccess) -> None:
        self._queue = queue
        self._mount = mount
        self._access = access

    def _after(self) -> None:
        disk = self._mount.disk
        if disk.dead:
            self.crash()
            raise PowerCut(f"the power was cut at {disk.fired} under the child")

    def _called(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            result = method(*args, **kwargs)
        except OperationHang as hang:
            inside = self._mount.describe_in_flight()
            self._after()
            raise ChildHangError(f"the store's child was killed: {hang}"
                                 + (f", inside the FUSE call {inside}" if inside else "")
                                 ) from None
        except BaseException:
            self._after()
            raise
        self._after()
        return result

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._queue, name)
        if not callable(attribute):
            return attribute
        return lambda *args, **kwargs: self._called(attribute, *args, **kwargs)

    def crash(self) -> None:
        """SIGKILL the child (its CPU time counted first)."""
        self._access.child_cpu_s += process_cpu_s(self._queue.process.pid)
        self._queue.crash()

    def close(self) -> None:
        pid = self._queue.process.pid
        cpu_s = process_cpu_s(pid)
        self._called(self._queue.close)
        self._access.child_cpu_s += cpu_s


class FuseAccess:
    """``power_loss.DiskAccess`` through FUSE (module docstring): ``impl`` is what the
    child serves (``MOD:FACTORY``, a built-in name, or ``exec:COMMAND``), ``store_path``
    the store's path on the disk."""

    through = "fuse"

    def __init__(self, impl: str, store_path: str) -> None:
        reason = fuse_available()
        if reason is not None:
            raise FuseUnavailableError(reason)
        self.factory = process_factory(impl, serve_quietly)
        self.store_path = store_path
        self._mounts: dict[int, tuple[Any, FuseMount]] = {}
        #: CPU seconds of the children, counted as each is killed or closed.
        self.child_cpu_s = 0.0

    def _mount(self, disk: SimDisk) -> FuseMount:
        held = self._mounts.get(id(disk))
        if held is not None:
            return held[1]
        manager = mount_disk(disk)
        mount = manager.__enter__()
        # The child dies by the FUSE call that cuts the power, with its process group (a
        # forked Python child's holds the servers it started: enter_forked_server); the
        # call in flight at the cut raises PowerCut anyway.
        mount.kill_at_cut = True
        self._mounts[id(disk)] = (manager, mount)
        return mount

    def open(self, disk: SimDisk, config: MQConfig, clock: Clock) -> Any:
        return self.open_with(disk, config=config, clock=clock, faults=None)

    def open_with(self, disk: SimDisk, **keywords: Any) -> Any:
        """The child's store on ``disk``, opened by the factory with ``keywords`` (a queue
        factory's, or a message store factory's: ``store_config=``) and the path."""
        if disk.dead:
            raise PowerCut("the disk is dead")
        mount = self._mount(disk)
        try:
            queue: Any = self.factory(path=mount.real_path(self.store_path), **keywords)
        except BaseException:
            if disk.dead:
                raise PowerCut(f"the power was cut at {disk.fired} under the child's "
                               "open") from None
            raise
        mount.add_process(queue.process.pid)
        powered = _PoweredQueue(queue, mount, self)
        if disk.dead:  # the open's last request returned after the cut
            powered.crash()
            raise PowerCut(f"the power was cut at {disk.fired} under the child's open")
        return powered

    def release(self, disk: SimDisk) -> None:
        held = self._mounts.pop(id(disk), None)
        if held is not None:
            held[0].__exit__(None, None, None)

    def close(self) -> None:
        problems = []
        for key in list(self._mounts):
            manager, _ = self._mounts.pop(key)
            try:
                manager.__exit__(None, None, None)
            except FuseMountError as exc:
                problems.append(str(exc))
        if problems:
            raise FuseMountError("; ".join(problems))
