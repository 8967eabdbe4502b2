"""Large sweeps on Spark and the reports made from them."""
