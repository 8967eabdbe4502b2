"""The test command's closing lines (tests/run_time.py) and the machine's speed
(conformance/bench/speed.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmqsim.conformance.bench.speed import (
    REFERENCE_MODEL_OPS_PER_CPU_S,
    MachineSpeed,
    measure_machine_speed,
)
from tests.run_time import CPU_ENV, STARTED_ENV, TARGET_ENV, closing_lines, machine_cpu_s, minutes

#: A machine exactly half as fast as the targets' one.
HALF = MachineSpeed(REFERENCE_MODEL_OPS_PER_CPU_S / 2, 1000, 0.5, 60_000, 80_000)


def test_the_lines_give_wall_cpu_speed_and_a_verdict_on_the_wall_measured_here() -> None:
    environ = {STARTED_ENV: "1000.0", CPU_ENV: "50000 2000", TARGET_ENV: "360"}
    lines = closing_lines(environ, 600.0, lambda: HALF, now_s=1000.0 + 700,
                          now_cpu=(1900.0, 80.0), cpu_count=2)
    assert lines[0].startswith("the test command: 11 min 40 s wall (pytest 10 min 0 s), 2 CPUs")
    assert lines[1] == ("the machine over it: 1,400 CPU s busy (every process), "
                        "60 CPU s stolen by its host")
    assert "(its rounds 60,000 to 80,000), 2.00x slower than the machine of the targets" in lines[2]
    # 1,400 CPU s on 2 CPUs: 700 s at the least, 350 s on a machine twice as fast.
    assert lines[3] == ("the floor of that CPU: on 2 CPUs it cannot end before 11 min 40 s "
                        "here, ~5 min 50 s scaled to the targets' machine's speed")
    assert lines[4] == ("target the test command <= 6 min 0 s: 11 min 40 s here, MISSED; "
                        "scaled to the targets' machine's speed: ~5 min 50 s")
    on_four = closing_lines(environ, 600.0, lambda: HALF, now_s=1000.0 + 700,
                            now_cpu=(1900.0, 80.0), cpu_count=4)
    assert on_four[3].startswith("the floor of that CPU: on 4 CPUs it cannot end before 5 min 50 s")
    met = closing_lines(environ, 300.0, lambda: HALF, now_s=1000.0 + 359, now_cpu=None)
    assert met[-1].startswith("target the test command <= 6 min 0 s: 5 min 59 s here, met;")
    assert not any(line.startswith("the machine over it") for line in met)  # no /proc/stat


def test_without_the_commands_start_or_target_there_is_no_verdict() -> None:
    """pytest run by hand, or test.sh with chosen tests (no target exported)."""
    lines = closing_lines({}, 42.0, lambda: HALF, now_s=0.0, now_cpu=(1.0, 0.0))
    assert lines[0].startswith("pytest: 42 s wall (pytest 42 s)")
    assert len(lines) == 2 and not any(line.startswith("target") for line in lines)
    assert not any(line.startswith("the floor") for line in lines)  # no CPU at the start
    damaged = {STARTED_ENV: "soon", CPU_ENV: "1 2 3"}
    assert len(closing_lines(damaged, 42.0, lambda: HALF, now_s=0.0, now_cpu=(1.0, 0.0))) == 2


def test_a_probe_that_fails_is_a_line_and_the_verdict_stands() -> None:
    """The run's verdict is pytest's: a speed probe that raises (a store it cannot open)
    says so in its line, and the target's verdict is given without a scaled time."""
    def broken() -> MachineSpeed:
        raise OSError("no space left on device")

    environ = {STARTED_ENV: "0", TARGET_ENV: "360"}
    lines = closing_lines(environ, 100.0, broken, now_s=120.0, now_cpu=None)
    assert lines[1] == "this machine's speed: not measured (OSError: no space left on device)"
    assert lines[2] == "target the test command <= 6 min 0 s: 2 min 0 s here, met"
    with_cpu = closing_lines({**environ, CPU_ENV: "0 0"}, 100.0, broken, now_s=120.0,
                             now_cpu=(150.0, 0.0), cpu_count=2)
    assert with_cpu[3] == "the floor of that CPU: on 2 CPUs it cannot end before 1 min 15 s here"


def test_proc_stat_is_read_as_busy_and_stolen_seconds(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 50 200 9000 30 10 40 25 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n")
    assert machine_cpu_s(stat) == (4.0, 0.25)  # user nice system irq softirq; steal
    stat.write_text("intr 1 2 3\n")
    assert machine_cpu_s(stat) is None
    assert machine_cpu_s(tmp_path / "absent") is None


def test_minutes() -> None:
    assert (minutes(59.4), minutes(60), minutes(861.3)) == ("59 s", "1 min 0 s", "14 min 21 s")


def test_the_probe_runs_the_model_for_the_cpu_asked() -> None:
    speed = measure_machine_speed(min_cpu_s=0.05)
    assert speed.cpu_s >= 0.05 and speed.operations > 0
    assert speed.operations % 300 == 0  # whole rounds of smoke seed 0's 300 operations
    slowest, median, fastest = (speed.slowest_ops_per_cpu_s, speed.model_ops_per_cpu_s,
                                speed.fastest_ops_per_cpu_s)
    assert 0 < slowest <= median <= fastest
    assert speed.slower_than_reference == REFERENCE_MODEL_OPS_PER_CPU_S / speed.model_ops_per_cpu_s
    with pytest.raises(ValueError, match="positive"):
        measure_machine_speed(min_cpu_s=0)
