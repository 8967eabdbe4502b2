"""``conformance.running.procfs``: one process's fields, CPU time and start, from /proc."""

from __future__ import annotations

import os
import subprocess
import sys

from rmqsim.conformance.running import procfs

BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\n"


def test_cpu_counts_the_reaped_children_only_when_asked() -> None:
    before_own = procfs.cpu_s(os.getpid())
    before_all = procfs.cpu_s(os.getpid(), reaped=True)
    assert before_own is not None and before_all is not None and before_all >= before_own
    subprocess.run([sys.executable, "-c", BURN], check=True, timeout=60)
    after_own, after_all = procfs.cpu_s(os.getpid()), procfs.cpu_s(os.getpid(), reaped=True)
    assert after_own is not None and after_all is not None
    assert (after_all - before_all) - (after_own - before_own) >= 0.25


def test_a_process_that_is_gone_has_no_fields_and_its_start_names_one_process() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        start = procfs.start_ticks(child.pid)
        fields = procfs.stat_fields(child.pid)
        assert start is not None and fields is not None and fields[0] in "RSD"
        assert procfs.start_ticks(child.pid) == start
    finally:
        child.kill()
        child.wait()
    assert procfs.stat_fields(child.pid) is None and procfs.cpu_s(child.pid) is None
    assert procfs.start_ticks(child.pid) is None
