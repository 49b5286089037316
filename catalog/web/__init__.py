"""The catalog's web pages (templates and static files ship inside the package)."""
