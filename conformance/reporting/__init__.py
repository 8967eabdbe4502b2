"""Reporting: failure reports, anomaly names, listed deviations."""

__all__: list[str] = []
