"""Auto-Join (Zhu et al., thesis ch. 4): join two tables whose keys need a transformation, and say
which one (`join.autojoin`); docs/algorithms/autojoin.md.

This package module stays light (every command imports the family to build its parser)."""
