"""Where runs keep their SUT's database (conformance.scratch)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conformance.run import run_seed
from conformance.scratch import RAM_DIRS, WORKDIR_ENV, scratch_root


def test_env_var_overrides_the_choice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(WORKDIR_ENV, str(tmp_path))
    assert scratch_root() == tmp_path


def test_default_prefers_a_writable_ram_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(WORKDIR_ENV, raising=False)
    ram = [d for d in RAM_DIRS if os.path.isdir(d) and os.access(d, os.W_OK)]
    if not ram:
        pytest.skip("no RAM-backed directory on this machine")
    assert scratch_root() == Path(ram[0])


def test_a_run_uses_the_scratch_root_and_cleans_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(WORKDIR_ENV, str(tmp_path))
    seen: list[Path] = []

    def factory(**kwargs: object):
        from conformance.adapter import rocksmq_factory

        seen.append(Path(str(kwargs["path"])))
        return rocksmq_factory(**kwargs)  # type: ignore[arg-type]

    result = run_seed("smoke", 0, impl=factory, steps=20)
    assert result.ok
    assert seen and all(tmp_path in p.parents for p in seen)
    assert list(tmp_path.iterdir()) == []  # the run's temporary directory is gone
