"""Benchmarks: each runs Juncture and its peer on the same data in one run and prints the ratio."""
