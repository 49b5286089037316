"""Alembic migrations of the catalog database.

`HEAD` names the newest revision so that `catalog.db.engine` can tell "already up to date" without loading
Alembic and parsing every script on each command; a test checks it against Alembic's own answer.
"""

HEAD = "0016_mate_postings_covering"
