"""SQLAlchemy models of the catalog database, one module per concept; import them all here so that
`Base.metadata` (which Alembic compares against) always knows every table."""

from catalog.db.models.base import Base, PackedInt32Array, PackedInt64Array
from catalog.db.models.entities import CatalogColumn, CatalogTable, ColumnProfile, PublishRun, Source, TableKey
from catalog.search.josie.models import JosieCostModel, JosieMeta, JosiePosting, JosieSet, JosieToken
from catalog.db.models.relations import JoinableColumn, UnionableTable

__all__ = [
    "Base",
    "CatalogColumn",
    "CatalogTable",
    "ColumnProfile",
    "JoinableColumn",
    "JosieCostModel",
    "JosieMeta",
    "JosiePosting",
    "JosieSet",
    "JosieToken",
    "PackedInt32Array",
    "PackedInt64Array",
    "PublishRun",
    "Source",
    "TableKey",
    "UnionableTable",
]
