"""The names of the pipeline stages and of the rebuild steps, derived from the family registry without
importing any job (the DAG files read them at parse time; `pipeline.all_stages()` and `rebuild.STEPS`
are the jobs themselves, and a test checks the two agree)."""

from __future__ import annotations

from catalog.core.registry import families


def index_family_names() -> list[str]:
    return [e.name for e in families() if e.pipeline is not None]


def stage_names() -> list[str]:
    """The stages `lake_index` runs for a batch, in order: one per index family in the middle."""
    return ["tokens", "profile", "keys", *index_family_names(), "relate", "publish"]


def rebuild_step_names() -> list[str]:
    """The steps of a rebuild, in order: one per index family that can rebuild (a family without
    a rebuild is skipped at run time, its step does nothing)."""
    return ["catch_up", *(f"rebuild_{name}" for name in index_family_names()), "relate_all", "publish_all"]
