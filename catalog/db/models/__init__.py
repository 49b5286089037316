"""SQLAlchemy models of the catalog's own entities and precomputed answers, one module per concept.

Each index family keeps its models in its own folder (`catalog/search/<family>/models.py`); the
migrations environment imports those too, so `Base.metadata` knows every table."""

from catalog.db.models.base import Base, PackedInt32Array, PackedInt64Array
from catalog.db.models.entities import (
    CatalogColumn,
    CatalogTable,
    ColumnProfile,
    CrawlFailure,
    CrawlRun,
    PublishRun,
    Source,
    TableKey,
)
from catalog.db.models.relations import JoinableColumn, UnionableTable

__all__ = [
    "Base",
    "CatalogColumn",
    "CatalogTable",
    "ColumnProfile",
    "CrawlFailure",
    "CrawlRun",
    "JoinableColumn",
    "PackedInt32Array",
    "PackedInt64Array",
    "PublishRun",
    "Source",
    "TableKey",
    "UnionableTable",
]
