"""The `juncture` command line: a thin adapter over the library (docs/contracts.md, "The command line")."""
