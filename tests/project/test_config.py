"""Settings (``tourneylake.config``): declared once, read from the environment and `.env`,
overridden by flags, validated with one line naming the variable, secrets never shown."""

from __future__ import annotations

from pathlib import Path

import pytest

from tourneylake.config import Settings, load_settings
from tourneylake.errors import ConfigError


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(__import__("os").environ):
        if name.startswith("TOURNEYLAKE_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)  # no stray .env


def test_defaults_are_the_sandboxs() -> None:
    settings = load_settings()
    assert settings.is_sandbox and settings.appname == "demo" and settings.source == "sandbox"
    assert settings.concurrency == 4 and settings.max_searches_per_run is None


def test_environment_then_dotenv_then_flags(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("TOURNEYLAKE_CONCURRENCY=3\nTOURNEYLAKE_FORMAT=xml\nTOURNEYLAKE_MAX_SEARCHES_PER_RUN=\n")
    settings = load_settings()
    assert settings.concurrency == 3 and settings.format == "xml" and settings.max_searches_per_run is None
    monkeypatch.setenv("TOURNEYLAKE_CONCURRENCY", "6")  # the environment wins over .env
    assert load_settings().concurrency == 6
    assert load_settings(concurrency=2).concurrency == 2  # a flag wins over both
    assert load_settings(concurrency=None).concurrency == 6  # an absent flag changes nothing


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("TOURNEYLAKE_CONCURRENCY", "lots", "TOURNEYLAKE_CONCURRENCY: Input should be a valid integer"),
        ("TOURNEYLAKE_CONCURRENCY", "100000", "TOURNEYLAKE_CONCURRENCY: Input should be less than or equal to 64"),
        ("TOURNEYLAKE_TIMEOUT_S", "0", "TOURNEYLAKE_TIMEOUT_S: Input should be greater than or equal to 0.05"),
        ("TOURNEYLAKE_TIMEOUT_S", "86400", "TOURNEYLAKE_TIMEOUT_S: Input should be less than or equal to 600"),
        ("TOURNEYLAKE_MAX_ATTEMPTS", "1000", "TOURNEYLAKE_MAX_ATTEMPTS: Input should be less than or equal to 20"),
        ("TOURNEYLAKE_RETRY_MAX_WAIT_S", "-1", "TOURNEYLAKE_RETRY_MAX_WAIT_S: Input should be greater than or equal to 0"),
        ("TOURNEYLAKE_RETRY_PASS_WAIT_S", "3600", "TOURNEYLAKE_RETRY_PASS_WAIT_S: Input should be less than or equal to 600"),
        ("TOURNEYLAKE_RETRY_WINDOW_S", "0", "TOURNEYLAKE_RETRY_WINDOW_S: Input should be greater than 0"),
        ("TOURNEYLAKE_FORMAT", "yaml", "TOURNEYLAKE_FORMAT: Input should be 'json' or 'xml'"),
        ("TOURNEYLAKE_RESERVE_SEARCHES", "-1", "TOURNEYLAKE_RESERVE_SEARCHES: Input should be greater than or equal to 0"),
        ("TOURNEYLAKE_SCHEDULE_CRON", "nightly", "TOURNEYLAKE_SCHEDULE_CRON: must be a daily cron expression 'M H * * *'"),
        ("TOURNEYLAKE_SCHEDULE_CRON", "0 3 * * 1", "TOURNEYLAKE_SCHEDULE_CRON: must be a daily cron expression"),
        ("TOURNEYLAKE_APPKEY", "NotLower", "TOURNEYLAKE_APPKEY: must be lowercase"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, message: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    text = str(caught.value)
    assert message in text and "\n" not in text
    if variable == "TOURNEYLAKE_APPKEY":
        assert value not in text  # a secret's value is never repeated


def test_secrets_never_show() -> None:
    settings = Settings(password="hunter2-secret", appkey="key123")
    shown = repr(settings) + str(settings) + str(settings.model_dump())
    assert "hunter2-secret" not in shown and "key123" not in shown
    assert settings.password.get_secret_value() == "hunter2-secret"


def test_overrides_are_validated_copies() -> None:
    settings = Settings()
    other = settings.with_overrides(concurrency=8, data_dir="elsewhere")
    assert other.concurrency == 8 and other.data_dir == Path("elsewhere") and settings.concurrency == 4
    with pytest.raises(ConfigError, match="TOURNEYLAKE_CONCURRENCY"):
        settings.with_overrides(concurrency=0)


def test_the_dagster_resource_is_generated_from_the_settings() -> None:
    from tourneylake.assets.resource import TourneylakeResource

    assert set(Settings.model_fields) <= set(TourneylakeResource.model_fields)
    resource = TourneylakeResource(concurrency=3, password="pw")
    assert resource.settings().concurrency == 3 and resource.settings().password.get_secret_value() == "pw"
    assert TourneylakeResource().settings() == load_settings()  # unset fields: the environment's or the default


def test_the_warehouse_file_may_live_apart_from_the_lake(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert load_settings(data_dir=tmp_path).warehouse_path == tmp_path / "warehouse.duckdb"
    monkeypatch.setenv("TOURNEYLAKE_WAREHOUSE", str(tmp_path / "elsewhere.duckdb"))
    assert load_settings(data_dir=tmp_path / "d").warehouse_path == tmp_path / "elsewhere.duckdb"
