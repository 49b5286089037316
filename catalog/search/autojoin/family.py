"""Auto-Join's serving half as an index family: no catalog tables and no index of its own (it
learns from the two tables it is given); `juncture autojoin` and POST /v1/autojoin call
`join.autojoin`."""

from __future__ import annotations

from catalog.search.family import SearchFamily

FAMILY = SearchFamily(name="autojoin")
