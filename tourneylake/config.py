"""Settings: declared once, here, and read from the environment and a `.env` file.

Every setting is a field of :class:`Settings` (pydantic-settings): its type, default, bounds and
description live on the field, and everything else follows from it — the ``TOURNEYLAKE_*``
environment variable (prefix + upper-cased name), the CLI's overrides, the Dagster resource
(``tourneylake.assets.resource`` wraps this class and binds each variable through ``EnvVar``), and the
settings reference of the docs (generated from the descriptions: ``scripts/docs_reference.py``). Adding a
setting is adding a field.

Secrets are ``SecretStr``: their ``repr``/``str`` never show the value, so a settings object can
be logged, printed in a traceback or shown by Dagster without leaking.
"""

from __future__ import annotations

import os
import re
from datetime import date
from pathlib import Path
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BeforeValidator, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from tourneylake.errors import ConfigError, one_line

__all__ = [
    "ENV_PREFIX",
    "IDENTITY",
    "ON_SANDBOX",
    "SANDBOX",
    "ConfigError",
    "Settings",
    "load_settings",
    "unwritable",
]

SANDBOX = "sandbox"
ENV_PREFIX = "TOURNEYLAKE_"

# The built-in sandbox's demo account (published in the README; see tourneylake.sandbox): the
# defaults of the four settings below, for the sandbox only. A live service gets them from its user.
SANDBOX_APPNAME = "demo"
SANDBOX_APPKEY = "sandboxkey2026"
SANDBOX_USERNAME = "analyst@example.com"
SANDBOX_PASSWORD = "correct-horse-battery"
#: The settings that say who calls: an account's and an application's.
IDENTITY = ("username", "password", "appname", "appkey")
#: What ``--sandbox`` sets: the built-in sandbox and its demo account, whatever the environment
#: says (a live service's password is never shown to the emulator, which would refuse it anyway).
ON_SANDBOX = {
    "base_url": SANDBOX,
    "appname": SANDBOX_APPNAME,
    "appkey": SANDBOX_APPKEY,
    "username": SANDBOX_USERNAME,
    "password": SANDBOX_PASSWORD,
}


# ---------------------------------------------------------------- the data directory's URL
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/@]*@")


def is_url(value: object) -> bool:
    """Whether ``value`` is a filesystem URL (``scheme://…``) rather than a local path."""
    return isinstance(value, str) and _URL.match(value) is not None


def shown(url: str) -> str:
    """A URL as it may be printed: any ``user:password@`` part hidden."""
    return _USERINFO.sub(r"\1***@", url)


def check_location(value: str) -> str:
    """A data directory URL's protocol is known and installed, and it holds no credentials; a
    ``ValueError`` (one line) otherwise. Reaches nothing."""
    import fsspec

    match = _URL.match(value)
    assert match is not None
    protocol = match.group(1).lower()
    if _USERINFO.match(value):
        raise ValueError("must not hold credentials: the store's own environment provides them (AWS_* for s3, …)")
    if not value[match.end() :].strip("/") and protocol not in ("file", "memory"):
        raise ValueError(f"a {protocol}:// URL needs a bucket or a path, e.g. {protocol}://bucket/prefix")
    try:
        fsspec.get_filesystem_class(protocol)
    except ValueError:
        raise ValueError(f"unknown filesystem protocol {protocol!r} (fsspec knows file, memory, s3, gs, az, …)") from None
    except ImportError as exc:
        raise ValueError(f"the {protocol}:// filesystem needs a package that is not installed ({one_line(exc)})") from None
    return value


def _data_dir(value: Any) -> Any:
    """A local path (``file://`` URLs included) is a :class:`Path`; any other fsspec URL
    (``s3://bucket/prefix``…) stays text, checked (known protocol, no credentials in it) but not
    reached."""
    if isinstance(value, str) and is_url(value.strip()):
        value = check_location(value.strip())
        if value.lower().startswith("file://"):
            from fsspec.implementations.local import LocalFileSystem

            return Path(LocalFileSystem._strip_protocol(value))
        return value
    return Path(value) if isinstance(value, str) else value


#: A local directory (a Path) or an fsspec filesystem URL (a str).
DataDir = Annotated[Path | str, BeforeValidator(_data_dir)]


class Settings(BaseSettings):
    """Everything a run needs to know. ``Settings()`` reads the environment and `.env`;
    keyword arguments (CLI flags) win over both; :func:`load_settings` turns a bad value into a
    one-line :class:`ConfigError` naming the variable."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_file=".env",
        env_file_encoding="utf-8",
        env_ignore_empty=True,
        extra="ignore",
        frozen=True,
    )

    base_url: str = Field(
        SANDBOX, description="the service root (paths start `/api/{appname}/`); `sandbox` starts the built-in emulator in-process"
    )
    appname: str = Field(
        SANDBOX_APPNAME,
        min_length=1,
        description="application name (the first path segment after `/api`); required with a live base URL (the "
        "default is the sandbox's demo account, which a live service never gets)",
    )
    appkey: SecretStr = Field(
        SecretStr(SANDBOX_APPKEY),
        description="application key, lowercase; used only to encode the password; required with a live base URL",
    )
    username: str = Field(
        SANDBOX_USERNAME, description="the account's user name (an e-mail address); required with a live base URL"
    )
    password: SecretStr = Field(
        SecretStr(SANDBOX_PASSWORD),
        description="the account's password: sent only encoded, never logged or stored; required with a live base URL",
    )
    format: Literal["json", "xml"] = Field("json", description="response format asked for: the same tables either way")
    credentials_in: Literal["headers", "query"] = Field(
        "headers", description="where the credentials go: HTTP headers or query parameters"
    )
    data_dir: DataDir = Field(
        Path("data"),
        description="the lake (`lake/`) and the warehouse (`warehouse.duckdb`): a local directory, or an fsspec URL "
        "(`s3://bucket/prefix`, `gs://…`; `memory://…` for tests, without tables) whose credentials come from that store's usual environment "
        "(`AWS_*` for s3); with a URL the warehouse file and the hands stay local: set `TOURNEYLAKE_WAREHOUSE`",
    )
    state_url: SecretStr | None = Field(
        None,
        description="a PostgreSQL URL (`postgresql://user:password@host:5432/db`) for the state that workers on several "
        "machines share: the search ledger, the lake's locks, cost votes, the question cache, the backlog of pairs owed "
        "and the night's player split; unset: files in the lake (`lake/_ledger/`, `lake/_state/`), for one machine. "
        "It bears a password: never logged or stored",
    )
    watchlist: Path = Field(Path("watchlist.yaml"), description="the watchlist: players and named filters to harvest")
    warehouse: Path | None = Field(
        None,
        description="the DuckDB warehouse file (always local); unset: `warehouse.duckdb` in the data directory "
        "(required when the data directory is a URL); hand analyses are kept beside it then",
    )
    max_searches_per_run: int | None = Field(
        None, ge=0, description="cap on searches per night (re-runs of a night share it); empty = unlimited"
    )
    reserve_searches: int = Field(0, ge=0, description="searches never spent: the account never goes below this")
    concurrency: int = Field(4, ge=1, le=64, description="parallel calls (the service polices parallel sessions: error 101024)")
    concurrency_probe_s: float = Field(
        10.0,
        ge=0.01,
        le=600,
        description="after the service refused parallel sessions, quiet seconds before concurrency is raised by one again",
    )
    timeout_s: float = Field(30.0, ge=0.05, le=600, description="per-request timeout, seconds")
    max_attempts: int = Field(5, ge=1, le=20, description="attempts per call (transient failures are retried with backoff)")
    retry_initial_wait_s: float = Field(0.5, ge=0, le=60, description="first backoff wait, seconds")
    retry_max_wait_s: float = Field(30.0, ge=0, le=600, description="longest backoff wait, seconds")
    retry_max_total_s: float = Field(120.0, gt=0, le=3600, description="longest time spent retrying one call, seconds")
    retry_pass_wait_s: float = Field(
        30.0,
        ge=0,
        le=600,
        description="pause before the last pass over the calls that failed transiently, at the end of the harvest, seconds",
    )
    retry_window_s: float = Field(
        10800.0,
        gt=0,
        le=86400,
        description="time from the start of a harvest after which nothing is retried any more (the night must end), seconds",
    )
    tables_worker: Literal["auto", "on", "off"] = Field(
        "auto",
        description="make the night's summary tables in a second process while the first fetches (a second core's "
        "worth of speed): `auto` when the machine has two cores or more and the watchlist has at least 200 pairs; "
        "`on` always (but for a `memory://` lake); `off` never",
    )
    rebuild_workers: int = Field(
        0,
        ge=0,
        le=64,
        description="processes that rebuild several nights side by side (`tourneylake rebuild --all` or a range): "
        "0 = one per core, at most 8; 1 = one night after another in the rebuilding process",
    )
    table_history_days: float = Field(
        7.0,
        ge=0,
        le=3650,
        description="days the lake's tables keep their past versions (a replaced night can be read as it was, by "
        "any Delta reader's time travel); after each night's load and each rebuild, the files only older versions "
        "need are deleted (Delta's vacuum); 0 keeps only the current version",
    )
    compaction_days: int = Field(
        7,
        ge=0,
        le=366,
        description="how often the lake's tables are compacted, in nights: on each night whose date is a multiple of it "
        "(weekly by default), that night's load also rewrites each earlier night held in several parts as one part "
        "(Delta's optimize), the parts it replaces expiring after `table_history_days`; 0 never",
    )
    account_workers: int = Field(
        0,
        ge=0,
        le=64,
        description="with several watchlist accounts, how many `tourneylake run` harvests side by side, each in a process "
        "of its own (Dagster's multiprocess executor; the service polices sessions per account, so accounts are what "
        "runs in parallel): 0 = all of them (at most 16), 1 = one after another in one process (in-process executor)",
    )
    schedule_cron: str = Field("0 3 * * *", description="the nightly schedule: a daily cron `M H * * *`, UTC")
    # The service's FAQ: "All daily search quotas are reset at 12 Midnight PST (GMT -8)"; its client
    # documentation: "midnight Pacific Time (UTC -8)". GMT-8 all year: 08:00 UTC.
    quota_reset_utc: str = Field(
        "08:00",
        description="when the service resets every daily search quota, `HH:MM` UTC (its FAQ: 12 midnight PST, GMT-8): "
        "searches left then are lost; the budget, `tourneylake budget` and `tourneylake drain` plan by it",
    )
    drain_lead_min: int = Field(
        30,
        ge=1,
        le=720,
        description="the drain schedule (off by default) fires this many minutes before the quota reset, to spend "
        "the searches that would expire on the backlog of pairs owed",
    )
    first_night: date | None = Field(
        None,
        description="the first night of Dagster's partitions (YYYY-MM-DD); unset: the first night the lake holds, "
        "or yesterday on an empty lake (a running `dagster dev` sees a change when its code location is reloaded)",
    )
    max_backfill_nights: int = Field(
        7,
        ge=1,
        le=3660,
        description="the most nights one Dagster backfill may harvest: a larger one is refused before it spends a "
        "search (so is one whose searches exceed what the account has left above the reserve)",
    )
    landed_by_hour_utc: int = Field(
        6,
        ge=0,
        le=23,
        description="the hour (UTC) of the next day by which a night is expected in the lake and the warehouse: "
        "the freshness check fails after it",
    )
    time_zone: str = Field(
        "UTC",
        description="the time zone (an IANA name, e.g. `Europe/London`) the analyses' hour-of-week breakdown reads "
        "tournament starts in (the dbt var `time_zone`); days, weeks and months stay UTC",
    )
    alert_webhook_url: SecretStr | None = Field(
        None,
        description="a URL that receives a JSON post (night, job, reason, searches spent; never a secret) when a "
        "nightly run fails, in Dagster or from `tourneylake run`; kept secret (chat webhooks hold a token)",
    )

    @model_validator(mode="before")
    @classmethod
    def _own_identity(cls, data: Any) -> Any:
        """A live service is called with the account and application its user gave, never the
        sandbox's demo ones (the defaults): each of the four must be set, or nothing is sent."""
        if not isinstance(data, dict) or str(data.get("base_url") or SANDBOX).strip() == SANDBOX:
            return data
        missing = [ENV_PREFIX + name.upper() for name in IDENTITY if _unset(data.get(name))]
        if missing:
            names = ", ".join(missing[:-1]) + " and " + missing[-1] if len(missing) > 1 else missing[0]
            raise ValueError(f"{names} must be set for a live service: put them in .env (the demo account is the sandbox's only)")
        return data

    @field_validator("state_url")
    @classmethod
    def _postgres_url(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not value.get_secret_value().startswith(("postgresql://", "postgres://")):
            raise ValueError("must be a postgresql:// URL")
        return value

    @field_validator("appkey")
    @classmethod
    def _lowercase_key(cls, value: SecretStr) -> SecretStr:
        if value.get_secret_value() != value.get_secret_value().lower():
            raise ValueError("must be lowercase (the service issues it so)")
        return value

    @field_validator("schedule_cron")
    @classmethod
    def _daily(cls, value: str) -> str:
        # Nights are daily partitions: the schedule fires once a day, at a minute and hour (UTC).
        fields = value.split()
        daily = len(fields) == 5 and fields[2:] == ["*", "*", "*"]
        if not daily or not (fields[0].isdigit() and int(fields[0]) < 60 and fields[1].isdigit() and int(fields[1]) < 24):
            raise ValueError("must be a daily cron expression 'M H * * *' (UTC), e.g. '0 3 * * *'")
        return value

    @field_validator("time_zone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"{value!r} is no time zone this machine knows: use an IANA name such as 'Europe/London'") from None
        return value

    @field_validator("quota_reset_utc")
    @classmethod
    def _time_of_day(cls, value: str) -> str:
        hours, colon, minutes = value.strip().partition(":")
        if not (colon and len(minutes) == 2 and hours.isascii() and hours.isdigit() and minutes.isascii() and minutes.isdigit()):
            raise ValueError("must be a time of day HH:MM (UTC), e.g. '08:00'")
        if int(hours) > 23 or int(minutes) > 59:
            raise ValueError("must be a time of day HH:MM (UTC) between 00:00 and 23:59")
        return f"{int(hours):02d}:{minutes}"

    @property
    def quota_reset_s(self) -> int:
        """The quota reset, in seconds after midnight UTC."""
        hours, minutes = self.quota_reset_utc.split(":")
        return int(hours) * 3600 + int(minutes) * 60

    @property
    def model_vars(self) -> dict[str, object]:
        """The dbt vars the settings give the models (``sql/dbt_project.yml``'s ``vars``)."""
        return {"time_zone": self.time_zone}

    @property
    def is_sandbox(self) -> bool:
        return self.base_url == SANDBOX

    @property
    def source(self) -> str:
        """Where the data comes from, as the lake records it: synthetic and live never mix."""
        if self.is_sandbox or self.base_url.startswith("sandbox:"):
            return "sandbox"
        return "live:" + self.base_url.rstrip("/")

    @property
    def lake_is_remote(self) -> bool:
        """The lake is at an fsspec URL (an object store; ``file://`` URLs are local paths)."""
        return isinstance(self.data_dir, str)

    @property
    def local_dir(self) -> Path:
        """Where local files go: the data directory, or (lake at a URL) the warehouse's folder."""
        if isinstance(self.data_dir, Path):
            return self.data_dir
        return self.warehouse_path.parent

    @property
    def warehouse_path(self) -> Path:
        """The DuckDB file: always local. A lake at a URL has no local directory to default to,
        so ``TOURNEYLAKE_WAREHOUSE`` must be set (a one-line :class:`ConfigError` says so)."""
        if self.warehouse is not None:
            return self.warehouse
        if isinstance(self.data_dir, str):
            raise ConfigError(
                f"{ENV_PREFIX}WAREHOUSE: must be set when {ENV_PREFIX}DATA_DIR is a URL ({shown(self.data_dir)}): "
                "the DuckDB file stays local, e.g. TOURNEYLAKE_WAREHOUSE=./warehouse.duckdb"
            )
        return self.data_dir / "warehouse.duckdb"

    def with_overrides(self, **overrides: Any) -> Settings:
        """A validated copy with the given (non-None) values."""
        clean = {k: v for k, v in overrides.items() if v is not None}
        return _build(lambda: type(self)(**{**self.model_dump(), **clean}))


def unwritable(settings: Settings) -> str | None:
    """Why the settings' local data directory (the data directory, or the warehouse's folder when
    the lake is at a URL) cannot be written, in one line naming it and its variable; ``None`` when
    it can (or can be made). Makes nothing: it looks at the folder, or the nearest one above it."""
    variable = ENV_PREFIX + ("DATA_DIR" if isinstance(settings.data_dir, Path) else "WAREHOUSE")
    folder = settings.local_dir.absolute()
    existing = next((p for p in (folder, *folder.parents) if p.exists()), None)
    if existing is None:
        return None
    if not existing.is_dir():
        return f"{variable}: the data directory {folder} cannot be made: {existing} is a file, not a folder"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{variable}: the data directory {folder} cannot be written ({existing} is not writable): choose another or fix its permissions"
    return None


def load_settings(**overrides: Any) -> Settings:
    """The settings from the environment and `.env`, with ``overrides`` (non-None) on top; a bad
    value raises :class:`ConfigError` with one line naming the variable."""
    clean = {k: v for k, v in overrides.items() if v is not None}
    return _build(lambda: Settings(**clean))


def _build(make: Any) -> Settings:
    try:
        return make()
    except ValidationError as exc:
        raise ConfigError(_one_line(exc)) from None


def _unset(value: Any) -> bool:
    if isinstance(value, SecretStr):
        value = value.get_secret_value()
    return value is None or (isinstance(value, str) and not value.strip())


def _one_line(exc: ValidationError) -> str:
    problems = []
    for error in exc.errors():
        message = str(error["msg"]).removeprefix("Value error, ")
        if not error["loc"]:  # the settings as a whole: the message names its variables
            problems.append(message)
            continue
        field = str(error["loc"][0])
        value = error.get("input")
        if field == "data_dir" and isinstance(value, str):
            value = shown(value)  # never a user:password@ part
        got = "" if field in ("appkey", "password", "alert_webhook_url", "state_url") else f" (got {value!r})"
        problems.append(f"{ENV_PREFIX}{field.upper()}: {message}{got}")
    return "; ".join(problems)
