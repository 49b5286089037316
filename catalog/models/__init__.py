"""SQLAlchemy models of the catalog database, one module per concept; import them all here so that
`Base.metadata` (which Alembic compares against) always knows every table."""

from catalog.models.base import Base, PackedInt32Array, PackedInt64Array
from catalog.models.entities import CatalogColumn, CatalogTable, ColumnProfile, PublishRun, Source, TableKey

__all__ = [
    "Base",
    "CatalogColumn",
    "CatalogTable",
    "ColumnProfile",
    "PackedInt32Array",
    "PackedInt64Array",
    "PublishRun",
    "Source",
    "TableKey",
]
