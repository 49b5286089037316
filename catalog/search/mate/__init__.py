"""MATE n-ary join search (`search.py`) over the published index (`source.py`); docs/algorithms/mate.md.

This package module stays light (every command imports the family to build its parser)."""

METHODS = ("mate", "scr", "mcr", "brute")  # `search nary --method`: the same answers, different work
