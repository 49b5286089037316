"""PEXESO: exact joinable-column search in embedding space (`search.py`) over a pivot-mapped,
hierarchically gridded index (`index.py`, `grid.py`, `pivots.py`); docs/algorithms/pexeso.md.

This package module stays light (every command imports the families to build its parser)."""

METHODS = ("pexeso", "brute")  # `search semantic --method`: the same answers, different work
