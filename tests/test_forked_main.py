"""A forked reference server (``--crash-mode process``, a Python store's power-loss sweep
through FUSE) does not run the parent's main script again: Python 3.11's fork server
never preloads ``__main__`` (CPython gh-137996), and a child told to run it imported
the whole command line again, ~60 ms of CPU per open instead of a fork. A ``serve``
defined in ``__main__`` still gets it. A child imports nothing the fork server lacks: its
body lives in a light module, and the fork server, whoever starts it, preloads every
built-in implementation."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

#: A main script that leaves a line in ``$MARK`` each time it runs (as ``__main__`` in
#: the parent, as ``__mp_main__`` in a child told to run it again).
MARKING = """\
import os
with open(os.environ["MARK"], "a") as marks:
    marks.write(f"{os.getpid()} {__name__}\\n")
"""


def _run(script: Path, mark: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(script), *args], capture_output=True,
                          text=True, check=False, timeout=120, cwd=script.parent,
                          env=dict(os.environ, MARK=str(mark)))  # fmt: skip


def test_process_mode_children_do_not_run_the_main_script_again(tmp_path: Path) -> None:
    mark = tmp_path / "marks"
    script = tmp_path / "rmqsim_main.py"
    script.write_text(MARKING + textwrap.dedent("""\
        import sys
        from rmqsim.conformance.cli import main
        from rmqsim.conformance.wire import client

        class CountedChild(client.ForkedChild):  # each start leaves "<pid> started"
            def __init__(self, *args):
                with open(os.environ["MARK"], "a") as marks:
                    marks.write(f"{os.getpid()} started\\n")
                super().__init__(*args)

        client.ForkedChild = CountedChild  # what forked_factory starts
        if __name__ == "__main__":
            sys.exit(main())
        """))
    done = _run(script, mark, "run", "--profile", "smoke", "--seeds", "0:1",
                "--crash-mode", "process", "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr[-2000:]
    names = [line.split()[1] for line in mark.read_text().splitlines()]
    assert names[0] == "__main__" and set(names[1:]) == {"started"} and len(names) >= 4


def test_a_serve_defined_in_main_still_reaches_its_children(tmp_path: Path) -> None:
    mark = tmp_path / "marks"
    script = tmp_path / "own_serve.py"
    script.write_text(MARKING + textwrap.dedent("""\
        import sys
        from pathlib import Path
        from rmqsim.conformance.running.lockstep import SimClock
        from rmqsim.conformance.running.process_sut import process_factory
        from rmqsim.conformance.wire.server import serve_forked
        from rmqsim.model.api import MQConfig

        def serve(requests, replies, impl):
            serve_forked(requests, replies, impl)

        if __name__ == "__main__":
            factory = process_factory("rocksmq", serve=serve)
            path = Path(sys.argv[1])
            queue = factory(path=path, config=MQConfig(), clock=SimClock(), faults=None)
            queue.create_topic("t")
            queue.crash()
            queue = factory(path=path, config=MQConfig(), clock=SimClock(), faults=None)
            print(sorted(queue.snapshot().topics))
            queue.close()
        """))
    done = _run(script, mark, str(tmp_path / "queue"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "['t']"
    names = [line.split()[1] for line in mark.read_text().splitlines()]
    assert names[0] == "__main__" and set(names[1:]) == {"__mp_main__"} and len(names) >= 3


def test_the_fuse_childs_body_imports_nothing_the_fork_server_lacks() -> None:
    """A forked child unpickles its body by module and name: the power-loss sweep's child
    body (``quiet_server.serve_quietly``) lives where importing it costs nothing beyond
    what every fork server preloads (once ``power_fuse``'s, it made each child import
    ``power_fuse``, ``fuse_disk`` and ``ctypes``: ~20 ms per open)."""
    from rmqsim.conformance.crashing import power_fuse

    assert power_fuse.serve_quietly.__module__ == "rmqsim.conformance.crashing.quiet_server"
    probe = textwrap.dedent("""\
        import sys
        import rmqsim.conformance.wire.server, rmqsim.conformance.adapter, rmqsim.impl
        before = set(sys.modules)
        import rmqsim.conformance.crashing.quiet_server
        print(sorted(set(sys.modules) - before))
        """)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True, timeout=60)  # fmt: skip
    assert done.stdout.split() == ["['rmqsim.conformance.crashing',",
                                   "'rmqsim.conformance.crashing.quiet_server']"]


#: Starts the fork server with one built-in implementation's factory, then forks a
#: server of another whose body reports which implementation modules its child found
#: already imported (the fork server's preload), and exits.
OTHER_IMPL_CHILD = """
import sys
from pathlib import Path
from typing import Any
from rmqsim.conformance.running.lockstep import SimClock
from rmqsim.conformance.running.process_sut import process_factory
from rmqsim.model.api import MQConfig
from tests.test_forked_main import serve_reporting_preloaded

if __name__ == "__main__":
    process_factory("rocksmq")  # its hello check starts the fork server
    factory = process_factory("commitlog", serve=serve_reporting_preloaded)
    queue = factory(path=Path(sys.argv[1]), config=MQConfig(), clock=SimClock(), faults=None)
    queue.close()
"""


def serve_reporting_preloaded(requests: Any, replies: Any, impl: str) -> None:
    """A forked server's body: writes to ``$MARK`` whether the commit log's module was in
    the child from the start, then serves."""
    from rmqsim.conformance.wire.server import serve_forked

    with open(os.environ["MARK"], "a") as marks:
        marks.write(f"{'rmqsim.impl.commitlog' in sys.modules}\n")
    serve_forked(requests, replies, impl)


def test_a_fork_server_started_for_one_builtin_impl_preloads_the_others(tmp_path: Path) -> None:
    """A process has one fork server, preloaded with what its first start asked for: a
    fork server started for ``rocksmq`` (the bench's forked runs, say) serves a commit
    log's children (its power-loss sweep through FUSE, next) without their importing the
    commit log (once ~3x the CPU per case)."""
    script = tmp_path / "other_impl.py"
    script.write_text(OTHER_IMPL_CHILD)
    mark = tmp_path / "marks"
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "queue")],
                          capture_output=True, text=True, check=False, timeout=120,
                          env=dict(os.environ, MARK=str(mark),
                                   PYTHONPATH=str(Path(__file__).parents[1])))  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert set(mark.read_text().split()) == {"True"}
