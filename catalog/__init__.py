"""Juncture's catalog: settings, the catalog database, lookups, online search, CLI and HTTP API.

Nothing in this package imports Spark or Airflow at module level, so that `juncture lookup` and
`juncture search` answer without starting a JVM.
"""
