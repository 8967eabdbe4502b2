"""Measuring: ``rmqsim bench``'s figures, baselines and targets."""

__all__: list[str] = []
