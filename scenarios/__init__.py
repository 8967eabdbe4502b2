"""Seeded, deterministic simulations (simpy) that emit operations of one vocabulary."""
