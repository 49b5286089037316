"""The layers the folders show, checked on the imports themselves (module level and inside functions).

* core (`catalog/core`) imports nothing of the project but itself;
* the lake layer (`spark_jobs/lake`) imports only the core;
* sources (`plugins/sources`) import only the core;
* serving (`catalog/` outside core: db, search, lookup, api, cli) never imports Spark, Airflow,
  the pipeline (`spark_jobs`), the DAGs or the sources at module level: a CLI command that runs a
  job imports it inside its handler, marked `# deferred:`;
* every import inside a function says why it is there with a `# deferred: <reason>` comment (a
  heavy or optional dependency, or keeping DAG parsing and the lookup path light).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROJECT = ("catalog", "spark_jobs", "plugins", "dags", "bench")
HEAVY = ("pyspark", "airflow", "py4j", "delta")


def _modules() -> Iterator[tuple[str, Path]]:
    for top in PROJECT:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT)
            if "migrations" in rel.parts and "versions" in rel.parts:
                continue
            yield ".".join(rel.with_suffix("").parts).removesuffix(".__init__"), path


def _imports(path: Path) -> Iterator[tuple[str, int, bool, str]]:
    """(module imported, line, inside a function, the source line and the one before it)."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    tree = ast.parse(source)
    inner: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inner |= {id(sub) for sub in ast.walk(node) if isinstance(sub, (ast.Import, ast.ImportFrom))}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        context = lines[node.lineno - 1] + "\n" + (lines[node.lineno - 2] if node.lineno > 1 else "")
        for name in names:
            yield name, node.lineno, id(node) in inner, context


def _under_type_checking(path: Path) -> set[int]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            out |= {sub.lineno for sub in ast.walk(node) if hasattr(sub, "lineno")}
    return out


def _rule(module: str) -> tuple[str, ...] | None:
    """The project packages `module` may import at module level (None: no rule)."""
    if module.startswith("catalog.core"):
        return ("catalog.core",)
    if module.startswith("spark_jobs.lake"):
        return ("catalog.core", "spark_jobs.lake")
    if module.startswith("plugins.sources"):
        return ("catalog.core", "plugins.sources")
    if module == "catalog.db.migrations.env":
        return ("catalog.core", "catalog.db", "catalog.search.family")
    if module.startswith("catalog.") and not module.startswith("catalog.cli.demo"):
        return ("catalog.",)  # a module of its own layer or a lower one (never spark_jobs, dags, plugins)
    return None


VIOLATIONS = []
DEFERRED = []
for _module, _path in _modules():
    _allowed = _rule(_module)
    _typing_only = _under_type_checking(_path)
    for _name, _line, _inside, _context in _imports(_path):
        _where = f"{_path.relative_to(ROOT)}:{_line} imports {_name}"
        if _inside and "deferred:" not in _context:
            DEFERRED.append(_where)
        _top = _name.split(".")[0]
        if _allowed is None or _inside or _line in _typing_only or _top not in (*PROJECT, *HEAVY):
            continue
        if _top in HEAVY or not (_name + ".").startswith(_allowed):
            VIOLATIONS.append(_where)


@pytest.mark.parametrize("rule", ["layers"])
def test_each_layer_imports_only_the_layers_below(rule: str) -> None:
    assert VIOLATIONS == []


def test_every_import_inside_a_function_says_why() -> None:
    assert DEFERRED == []
