"""Alembic migrations of the catalog database.

`HEAD` names the newest revision so that `catalog.db.engine` can tell "already up to date" without loading
Alembic and parsing every script on each command; a test checks it against Alembic's own answer.
"""

HEAD = "0015_pexeso_partitions"
