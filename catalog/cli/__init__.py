"""The `juncture` command line: a thin adapter over the library (DESIGN.md, "Command line")."""
