"""SQLAlchemy models of the catalog database, one module per concept; import them all here so that
`Base.metadata` (which Alembic compares against) always knows every table."""

from catalog.models.base import Base, PackedInt32Array, PackedInt64Array
from catalog.models.entities import CatalogColumn, CatalogTable, ColumnProfile, PublishRun, Source, TableKey
from catalog.models.josie import JosieCostModel, JosieMeta, JosiePosting, JosieSet, JosieToken
from catalog.models.relations import JoinableColumn, UnionableTable

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
