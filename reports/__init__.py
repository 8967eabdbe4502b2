"""Large sweeps on Spark and the reports made from them."""

__all__: list[str] = []
