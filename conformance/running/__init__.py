"""Running: one run in lockstep, its result and trace, the gate over many, and where and
how the implementation under test runs."""

__all__: list[str] = []
