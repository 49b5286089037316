from __future__ import annotations

from pathlib import Path

import pytest

from catalog.core.errors import SettingsError
from catalog.core.settings import environment_with, load_settings


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "juncture.toml"
    path.write_text(text)
    return path


def test_defaults_live_under_home(tmp_path: Path) -> None:
    s = load_settings({}, cwd=tmp_path)
    assert s.home == tmp_path / "var"
    assert s.lake == str(tmp_path / "var" / "lake")
    assert s.catalog_url == f"sqlite:///{tmp_path / 'var' / 'catalog.db'}"
    assert s.spark.master == "local[*]"
    assert s.sources == ()


def test_file_values_are_read_and_paths_resolved_against_the_file(tmp_path: Path) -> None:
    conf = tmp_path / "conf"
    conf.mkdir()
    path = write(
        conf,
        """
home = "data"
[spark]
master = "spark://10.0.0.1:7077"
shuffle_partitions = 32
[index]
joinable_k = 50
[[sources]]
name = "nyc"
kind = "socrata"
url = "https://data.cityofnewyork.us"
[[sources]]
name = "mylake"
kind = "folder"
path = "lake-folder"
""",
    )
    s = load_settings({"JUNCTURE_CONFIG": str(path)}, cwd=tmp_path)
    assert s.home == conf / "data"
    assert s.spark.master == "spark://10.0.0.1:7077"
    assert s.spark.shuffle_partitions == 32
    assert s.index.joinable_k == 50
    assert [src.name for src in s.sources] == ["nyc", "mylake"]
    assert s.source("mylake").path == str(conf / "lake-folder")


def test_environment_overrides_the_file(tmp_path: Path) -> None:
    write(tmp_path, '[spark]\nmaster = "local[1]"\n')
    env = {
        "JUNCTURE_SPARK_MASTER": "local[2]",
        "JUNCTURE_CATALOG_URL": "postgresql+psycopg://u@h/db",
        "JUNCTURE_HOME": "elsewhere",
    }
    s = load_settings(env, cwd=tmp_path)
    assert s.spark.master == "local[2]"
    assert s.catalog_url == "postgresql+psycopg://u@h/db"
    assert s.home == tmp_path / "elsewhere"
    assert s.lake == str(tmp_path / "elsewhere" / "lake")


@pytest.mark.parametrize(
    ("text", "key", "problem"),
    [
        ("colour = 1\n", "colour", "unknown key"),
        ("[spark]\nmastr = 'x'\n", "spark.mastr", "unknown key"),
        ("[spark]\nshuffle_partitions = 'many'\n", "spark.shuffle_partitions", "expected an integer"),
        ("[spark]\nui = 3\n", "spark.ui", "expected true or false"),
        ("[index]\njoinable_k = -4\n", "index.joinable_k", "must not be negative"),
        ("log_format = 'xml'\n", "log_format", "must be one of"),
        ("[[sources]]\nname = 'a'\nkind = 'ftp'\n", "sources[0].kind", "must be one of"),
        ("[[sources]]\nname = 'a'\nkind = 'socrata'\n", "sources[0].url", "needs a url"),
        (
            "[[sources]]\nname = 'a'\nkind = 'folder'\npath = 'x'\n"
            "[[sources]]\nname = 'a'\nkind = 'folder'\npath = 'y'\n",
            "sources[1].name",
            "duplicate",
        ),
        ("spark = [", "(syntax)", ""),
    ],
)
def test_bad_file_values_name_file_and_key(tmp_path: Path, text: str, key: str, problem: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(SettingsError) as err:
        load_settings({}, cwd=tmp_path)
    assert err.value.where == str(path)
    assert err.value.key == key
    assert problem in err.value.problem
    assert str(path) in str(err.value) and key in str(err.value)


def test_bad_environment_values_name_the_variable(tmp_path: Path) -> None:
    with pytest.raises(SettingsError) as err:
        load_settings({"JUNCTURE_LOG_FORMAT": "yaml"}, cwd=tmp_path)
    assert err.value.where == "JUNCTURE_LOG_FORMAT"
    with pytest.raises(SettingsError) as err:
        load_settings({"JUNCTURE_LAEK": "/x"}, cwd=tmp_path)
    assert err.value.key == "JUNCTURE_LAEK"


def test_missing_config_file_named_by_variable_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="file not found"):
        load_settings({"JUNCTURE_CONFIG": str(tmp_path / "nope.toml")}, cwd=tmp_path)


def test_unknown_source_name_lists_the_known_ones(tmp_path: Path) -> None:
    write(tmp_path, "[[sources]]\nname = 'lake'\nkind = 'folder'\npath = '.'\n")
    s = load_settings({}, cwd=tmp_path)
    with pytest.raises(SettingsError, match="lake"):
        s.source("portal")


def test_each_index_family_reads_its_own_section(tmp_path: Path) -> None:
    path = tmp_path / "juncture.toml"
    path.write_text('[index]\njoinable_k = 7\n\n[index.josie]\ndirty_threshold = 0.05\nupdate_engine = "spark"\n')
    s = load_settings({}, config_file=path)
    josie = s.index.family("josie")
    assert (s.index.joinable_k, josie.dirty_threshold, josie.update_engine, josie.driver_max_lists) == (
        7,
        0.05,
        "spark",
        5_000_000,
    )
    assert load_settings({}, cwd=tmp_path / "none").index.family("josie").dirty_threshold == 0.2  # defaults
    path.write_text("[index.josie]\nthreshold = 1\n")
    with pytest.raises(SettingsError, match=r"index\.josie\.threshold: unknown key \(known: dirty_threshold"):
        load_settings({}, config_file=path)
    path.write_text("[index.nosuch]\nx = 1\n")
    with pytest.raises(SettingsError, match=r"index\.nosuch: unknown key \(known: .*josie"):
        load_settings({}, config_file=path)


def test_a_process_environment_carries_exactly_the_settings_given(tmp_path: Path) -> None:
    base = {"PATH": "/bin", "JUNCTURE_LAKE": "/elsewhere", "JUNCTURE_FAULT": "x"}
    env = environment_with(base, home=tmp_path / "h", catalog_url="sqlite:///c.db", lock_wait_s=2.5)
    assert env == {
        "PATH": "/bin",
        "JUNCTURE_HOME": str(tmp_path / "h"),
        "JUNCTURE_CATALOG_URL": "sqlite:///c.db",
        "JUNCTURE_LOCK_WAIT_S": "2.5",
    }
    settings = load_settings(env, cwd=tmp_path)
    assert settings.home == tmp_path / "h" and settings.catalog_url == "sqlite:///c.db"
    assert settings.lock_wait_s == 2.5 and settings.lake != "/elsewhere"
    with pytest.raises(KeyError):
        environment_with(base, no_such_setting=1)
