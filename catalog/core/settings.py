"""One settings object for all of Juncture, read once at the entry point and passed down.

Precedence: environment variables, then `juncture.toml`, then built-in defaults. The file is the one
named by `JUNCTURE_CONFIG`, else `./juncture.toml` if present. Unknown keys and malformed values raise
`SettingsError` naming the file (or variable) and the key, so a typo never silently falls back to a
default. Relative paths in the file are resolved against the file's folder; in variables, against
the working directory.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from catalog.core import registry
from catalog.core.errors import SettingsError

SourceKind = Literal["socrata", "ckan", "folder"]
SOURCE_KINDS: tuple[str, ...] = typing.get_args(SourceKind)


@dataclass(frozen=True)
class SourceConfig:
    """A place to crawl: a Socrata or CKAN portal (`url`) or a lake folder (`path`)."""

    name: str
    kind: SourceKind
    url: str = ""
    path: str = ""
    domain: str = ""  # Socrata: the domain whose datasets to list (defaults to the url's host)
    app_token: str = ""  # Socrata X-App-Token (optional)
    api_key: str = ""  # CKAN Authorization header (optional)
    schedule: str = "@daily"


@dataclass(frozen=True)
class SparkSettings:
    """Spark session defaults sized for a 2-core, 24 GB machine; override per deployment."""

    master: str = "local[*]"
    driver_memory: str = "4g"
    shuffle_partitions: int = 8
    ui: bool = False
    # "auto": delta-spark when the session has the Delta jars, else delta-rs commits Spark's files.
    delta_engine: Literal["auto", "delta-rs", "delta-spark"] = "auto"
    # Ask Spark to resolve the Delta jars at session start (needs Maven; production images only).
    delta_jars: bool = False
    conf: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class CrawlSettings:
    """Politeness and safety limits for talking to portals."""

    timeout_s: float = 30.0
    max_retries: int = 5
    backoff_base_s: float = 0.5
    backoff_max_s: float = 30.0
    requests_per_second: float = 5.0  # per host
    max_download_bytes: int = 512 * 1024 * 1024
    max_cell_bytes: int = 1024 * 1024
    max_retry_after_s: float = 120.0  # a longer Retry-After is waited this long, then retried
    max_decompressed_bytes: int = 1024 * 1024 * 1024  # gzip files are unpacked up to this size
    page_size: int = 1000  # Socrata `limit` / CKAN `rows` per listing request (CKAN caps at 1000)
    # Hosts a portal's resource URLs and redirects may lead to besides the portal's own: `host`
    # (any port), `host:port`, or `*.domain` (its subdomains). Credentials never go to them.
    allowed_hosts: tuple[str, ...] = ()
    max_redirects: int = 5  # per request; each hop is checked against the URL policy
    download_deadline_s: float = 600.0  # a whole download (all attempts) ends by then, however slow
    # Limits per table, checked while a file is read (before its cells are materialised).
    max_rows: int = 10_000_000
    max_columns: int = 16_384
    max_cells: int = 20_000_000
    max_json_bytes: int = 64 * 1024 * 1024  # JSON is parsed in memory: larger documents are refused


@dataclass(frozen=True)
class IndexSettings:
    """Index and precompute parameters."""

    cells_buckets: int = 16
    joinable_k: int = 20
    unionable_k: int = 10
    # relate: posting lists longer than this are skipped (answers touching them say exact=false)
    joinable_max_list: int = 1000
    # relate: each table is scored against at most this many candidate tables, chosen by rare shared
    # headers and joinable evidence; headers carried by more than `unionable_header_max_tables`
    # tables are no evidence at all
    unionable_candidates: int = 50
    unionable_header_max_tables: int = 200
    # relate: a table's candidates are also cut, in evidence order, to at most this many column pairs
    # (its width times theirs); its best candidate is always kept. Bounds what very wide tables cost.
    unionable_max_pairs: int = 1 << 20
    # `[index.<family>]` tables: each index family's own settings object (`catalog.core.registry`);
    # a family without a table gets its defaults.
    families: Mapping[str, Any] = field(default_factory=dict)

    def family(self, name: str) -> Any:
        """The settings of index family `name`."""
        if name in self.families:
            return self.families[name]
        entry = registry.family(name)
        if entry.settings is None:
            raise SettingsError("juncture.toml", f"index.{name}", "this index family has no settings")
        return registry.load(entry.settings)()

    def with_family(self, name: str, **changes: Any) -> IndexSettings:
        """A copy with some of family `name`'s settings changed."""
        return dataclasses.replace(
            self, families={**self.families, name: dataclasses.replace(self.family(name), **changes)}
        )


@dataclass(frozen=True)
class AirflowSettings:
    """How `juncture update` reaches Airflow: in-process unless an API server is configured."""

    api_url: str = ""
    username: str = ""
    password: str = ""
    home: str = ""  # embedded AIRFLOW_HOME (default: <home>/airflow)
    # Cluster mode: stage tasks spark-submit to the master of this Airflow connection; "" = in-process.
    spark_conn_id: str = ""
    # source name -> Airflow connection holding its app token / API key (plugins/airflow_plugin.py)
    source_connections: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Settings:
    home: Path = Path("var")
    lake: str = ""  # default: <home>/lake
    catalog_url: str = ""  # default: sqlite:///<home>/catalog.db
    log_format: Literal["kv", "json"] = "kv"
    # How long a writer (a CLI command or a DAG task) waits for the lake lock before giving up with
    # a message naming the holder (exit 2; a DAG task fails and is retried). 0: do not wait.
    lock_wait_s: float = 600.0
    spark: SparkSettings = field(default_factory=SparkSettings)
    crawl: CrawlSettings = field(default_factory=CrawlSettings)
    index: IndexSettings = field(default_factory=IndexSettings)
    airflow: AirflowSettings = field(default_factory=AirflowSettings)
    sources: tuple[SourceConfig, ...] = ()
    config_file: Path | None = None

    def source(self, name: str) -> SourceConfig:
        for s in self.sources:
            if s.name == name:
                return s
        known = ", ".join(s.name for s in self.sources) or "none configured"
        raise SettingsError(str(self.config_file or "juncture.toml"), "sources", f"no source named {name!r} ({known})")


# Environment variables and the (dotted) setting each one sets.
ENV_VARS: Mapping[str, str] = {
    "JUNCTURE_HOME": "home",
    "JUNCTURE_LAKE": "lake",
    "JUNCTURE_CATALOG_URL": "catalog_url",
    "JUNCTURE_SPARK_MASTER": "spark.master",
    "JUNCTURE_LOG_FORMAT": "log_format",
    "JUNCTURE_AIRFLOW_API_URL": "airflow.api_url",
    "JUNCTURE_LOCK_WAIT_S": "lock_wait_s",
    "JUNCTURE_CRAWL_ALLOWED_HOSTS": "crawl.allowed_hosts",
}
# Read elsewhere: the config file's path, and the fault-injection hooks of the crash-safety tests.
_META_VARS = frozenset({"JUNCTURE_CONFIG", "JUNCTURE_FAULT", "JUNCTURE_FAULT_MODE", "JUNCTURE_FAULT_TRACE"})


def environment_with(base: Mapping[str, str], **settings: object) -> dict[str, str]:
    """`base` (a process's environment) without its JUNCTURE_ variables, plus the variables of
    `settings` by setting name (`home=…`, `catalog_url=…`, `lock_wait_s=…`): the environment of a
    `juncture` process that must read these settings and no others the caller happens to have."""
    variable = {name.replace(".", "_"): var for var, name in ENV_VARS.items()}
    env = {k: v for k, v in base.items() if not k.startswith("JUNCTURE_")}
    env.update({variable[name]: str(value) for name, value in settings.items()})
    return env


def load_settings(
    env: Mapping[str, str] | None = None, *, config_file: str | Path | None = None, cwd: Path | None = None
) -> Settings:
    """Build `Settings` from `env` (default: os.environ) and the TOML file, validating every key."""
    env = os.environ if env is None else env
    cwd = cwd or Path.cwd()
    unknown = sorted(k for k in env if k.startswith("JUNCTURE_") and k not in ENV_VARS and k not in _META_VARS)
    if unknown:
        raise SettingsError("environment", unknown[0], f"unknown variable (known: {', '.join(sorted(ENV_VARS))})")

    path = Path(config_file or env.get("JUNCTURE_CONFIG") or cwd / "juncture.toml")
    if not path.is_absolute():
        path = cwd / path
    doc: dict[str, Any] = {}
    if path.exists():
        doc = _read_toml(path)
    elif config_file or env.get("JUNCTURE_CONFIG"):
        raise SettingsError(str(path), "JUNCTURE_CONFIG", "file not found")
    where = str(path)
    settings = _build(Settings, {k: v for k, v in doc.items() if k != "sources"}, where, "")
    sources = _build_sources(doc.get("sources", []), where, path.parent)
    settings = dataclasses.replace(settings, sources=sources, config_file=path if path.exists() else None)
    if "home" in doc:
        settings = dataclasses.replace(settings, home=_resolve(path.parent, str(settings.home)))
    if "lake" in doc and "://" not in settings.lake:
        settings = dataclasses.replace(settings, lake=str(_resolve(path.parent, settings.lake)))

    for var, dotted in ENV_VARS.items():
        if var in env:
            settings = _apply_env(settings, var, dotted, env[var], cwd)
    return _with_defaults(settings, cwd)


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise SettingsError(str(path), "(syntax)", str(e)) from None


def _resolve(base: Path, value: str) -> Path:
    p = Path(value).expanduser()
    return p if p.is_absolute() else (base / p)


def _with_defaults(s: Settings, cwd: Path) -> Settings:
    home = s.home if s.home.is_absolute() else (cwd / s.home)
    return dataclasses.replace(
        s,
        home=home,
        lake=s.lake or str(home / "lake"),
        catalog_url=s.catalog_url or f"sqlite:///{home / 'catalog.db'}",
    )


def _apply_env(s: Settings, var: str, dotted: str, raw: str, cwd: Path) -> Settings:
    section, _, key = dotted.rpartition(".")
    if not section:
        value = _coerce(_field_type(Settings, key), raw, var, key)
        if key == "home":
            value = _resolve(cwd, raw)
        if key == "lake" and "://" not in raw:
            value = str(_resolve(cwd, raw))
        return dataclasses.replace(s, **{key: value})
    sub = getattr(s, section)
    value = _coerce(_field_type(type(sub), key), raw, var, dotted)
    return dataclasses.replace(s, **{section: dataclasses.replace(sub, **{key: value})})


def _field_type(cls: type, name: str) -> Any:
    return typing.get_type_hints(cls)[name]


def _build(cls: type, table: Mapping[str, Any], where: str, prefix: str) -> Any:
    if not isinstance(table, Mapping):
        raise SettingsError(where, prefix.rstrip(".") or "(top level)", "expected a table")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls) if f.name not in ("config_file", "families")}
    family_settings = _family_settings() if cls is IndexSettings else {}
    kwargs: dict[str, Any] = {}
    for key, value in table.items():
        dotted = prefix + key
        if key in family_settings:
            kwargs.setdefault("families", {})[key] = _build(family_settings[key], value, where, dotted + ".")
            continue
        if key not in names:
            known = ", ".join(sorted(names | set(family_settings)))
            raise SettingsError(where, dotted, f"unknown key (known: {known})")
        hint = hints[key]
        if isinstance(hint, type) and dataclasses.is_dataclass(hint):
            kwargs[key] = _build(hint, value, where, dotted + ".")
        else:
            kwargs[key] = _coerce(hint, value, where, dotted)
    return cls(**kwargs)


def _family_settings() -> dict[str, type]:
    """Family name -> settings class, for the `[index.<family>]` tables."""
    return {e.name: registry.load(e.settings) for e in registry.families() if e.settings is not None}


def _build_sources(raw: Any, where: str, base: Path) -> tuple[SourceConfig, ...]:
    if not isinstance(raw, list):
        raise SettingsError(where, "sources", "expected an array of tables ([[sources]])")
    out: list[SourceConfig] = []
    for i, item in enumerate(raw):
        key = f"sources[{i}]"
        if not isinstance(item, Mapping) or "name" not in item or "kind" not in item:
            raise SettingsError(where, key, "each source needs at least `name` and `kind`")
        src: SourceConfig = _build(SourceConfig, item, where, key + ".")
        if src.kind in ("socrata", "ckan") and not src.url:
            raise SettingsError(where, key + ".url", f"a {src.kind} source needs a url")
        if src.kind == "folder":
            if not src.path:
                raise SettingsError(where, key + ".path", "a folder source needs a path")
            if "://" not in src.path:
                src = dataclasses.replace(src, path=str(_resolve(base, src.path)))
        if any(o.name == src.name for o in out):
            raise SettingsError(where, key + ".name", f"duplicate source name {src.name!r}")
        out.append(src)
    return tuple(out)


def _coerce(hint: Any, value: Any, where: str, key: str) -> Any:
    """Check `value` against the annotation `hint`; strings from the environment are parsed."""
    origin = typing.get_origin(hint)
    if origin is Literal:
        allowed = typing.get_args(hint)
        if value not in allowed:
            raise SettingsError(where, key, f"must be one of {', '.join(map(str, allowed))}, got {value!r}")
        return value
    if origin in (typing.Union, types.UnionType):  # `Path | None`
        inner = [a for a in typing.get_args(hint) if a is not type(None)]
        return _coerce(inner[0], value, where, key)
    if origin is tuple:  # `tuple[str, ...]`: a TOML array, or a comma-separated environment string
        items = [v.strip() for v in value.split(",")] if isinstance(value, str) else value
        if not isinstance(items, (list, tuple)) or not all(isinstance(v, str) for v in items):
            raise SettingsError(where, key, f"expected an array of strings, got {value!r}")
        return tuple(v for v in items if v)
    if origin is dict:
        if not isinstance(value, Mapping) or not all(isinstance(v, (str, int, float, bool)) for v in value.values()):
            raise SettingsError(where, key, "expected a table of simple values")
        return {str(k): str(v) for k, v in value.items()}
    if hint is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("1", "true", "yes", "on", "0", "false", "no", "off"):
            return value.lower() in ("1", "true", "yes", "on")
        raise SettingsError(where, key, f"expected true or false, got {value!r}")
    if hint in (int, float):
        if isinstance(value, bool):
            raise SettingsError(where, key, f"expected a number, got {value!r}")
        try:
            number = hint(value)
        except (TypeError, ValueError):
            kind = "an integer" if hint is int else "a number"
            raise SettingsError(where, key, f"expected {kind}, got {value!r}") from None
        if isinstance(value, float) and hint is int and not value.is_integer():
            raise SettingsError(where, key, f"expected an integer, got {value!r}")
        if number < 0:
            raise SettingsError(where, key, f"must not be negative, got {value!r}")
        return number
    if hint is Path:
        if not isinstance(value, str) or not value:
            raise SettingsError(where, key, f"expected a path, got {value!r}")
        return Path(value)
    if hint is str:
        if not isinstance(value, str):
            raise SettingsError(where, key, f"expected a string, got {value!r}")
        return value
    raise SettingsError(where, key, f"unsupported setting type {hint!r}")  # pragma: no cover - programming error
