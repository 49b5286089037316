"""The PEXESO index as the catalog database holds it, loaded for online search (no Spark).

A load reads every embedded column's vectors and the facts, and maps the vectors with the recorded
pivots into the grid (`PexesoIndex`); a long-running process (the API) keeps the loaded index
between requests (`hold`) and loads again when a new index version is published. The query is
embedded by the embedder the index records: this build's embedder of that name, refused when its
version or dimension differ (`EmbedderMismatchError`).
"""

from __future__ import annotations

import base64
import json
import weakref
from dataclasses import dataclass

import numpy as np
from sqlalchemy import Connection, Engine, select

from catalog.core.embedding import Embedder
from catalog.core.errors import EmbedderMismatchError, UserError
from catalog.search.family import published_facts
from catalog.search.pexeso.index import ColumnRef, EmbeddingSpec, IndexShape, PexesoIndex, pexeso_embedder
from catalog.search.pexeso.models import PexesoColumn, PexesoMeta


@dataclass(frozen=True)
class LoadedIndex:
    version: str
    index: PexesoIndex
    embedder: Embedder


_HELD: weakref.WeakKeyDictionary[Engine, LoadedIndex] = weakref.WeakKeyDictionary()


def embedder_for(spec: EmbeddingSpec) -> Embedder:
    """This build's embedder that made vectors of `spec` (refused when it would embed otherwise)."""
    embedder = pexeso_embedder(spec.dimension)
    if EmbeddingSpec.of(embedder) != spec:
        raise EmbedderMismatchError(spec, EmbeddingSpec.of(embedder))
    return embedder


def load_index(conn: Connection, *, hold: bool = False) -> LoadedIndex:
    """The catalog's PEXESO index (the process's copy when `hold` and still current)."""
    meta = published_facts(conn, PexesoMeta, "PEXESO")
    held = _HELD.get(conn.engine) if hold else None
    if held is not None and held.version == meta["index_version"]:
        return held
    spec = EmbeddingSpec(**json.loads(meta["spec"]))
    shape = IndexShape(**json.loads(meta["shape"]))
    pivots = np.frombuffer(base64.b64decode(meta["pivots"]), "<f4").reshape(shape.n_pivots, spec.dimension)
    rows = conn.execute(
        select(
            PexesoColumn.column_id,
            PexesoColumn.table_id,
            PexesoColumn.header,
            PexesoColumn.value_list,
            PexesoColumn.vectors,
        ).order_by(PexesoColumn.column_ref)
    ).all()
    refs = [ColumnRef(r[0], r[1], r[2]) for r in rows]
    values: list[str] = []
    sizes = []
    for r in rows:
        column_values = json.loads(r[3])
        values.extend(column_values)
        sizes.append(len(column_values))
    blob = b"".join(r[4] for r in rows)
    vectors = (
        np.frombuffer(blob, "<f4").reshape(-1, spec.dimension) if blob else np.zeros((0, spec.dimension), np.float32)
    )
    if len(vectors) != len(values):
        raise UserError(f"the catalog's PEXESO index is inconsistent: {len(vectors)} vectors, {len(values)} values")
    value_array = np.empty(len(values), object)
    value_array[:] = values
    index = PexesoIndex(
        spec=spec,
        shape=shape,
        pivots=pivots,
        columns=refs,
        vectors=vectors,
        column_of=np.repeat(np.arange(len(refs), dtype=np.int64), sizes),
        values=value_array,
    )
    loaded = LoadedIndex(meta["index_version"], index, embedder_for(spec))
    if hold:
        _HELD[conn.engine] = loaded
    return loaded
