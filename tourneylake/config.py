"""Settings from the environment (and a `.env` file), overridable by CLI flags.

Secrets are wrapped in :class:`Secret`, whose ``repr``/``str`` never show the value, so a
settings object can be logged, printed in a traceback or shown by Dagster without leaking.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal

from dotenv import dotenv_values

SANDBOX = "sandbox"

# The built-in sandbox's demo account (published in the README; see tourneylake.sandbox).
SANDBOX_APPNAME = "demo"
SANDBOX_APPKEY = "sandboxkey2026"
SANDBOX_USERNAME = "analyst@example.com"
SANDBOX_PASSWORD = "correct-horse-battery"

ENV_PREFIX = "TOURNEYLAKE_"


class ConfigError(ValueError):
    """A setting is missing or malformed."""


class Secret:
    """A value that never shows itself in ``repr``, ``str``, logs or tracebacks."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __bool__(self) -> bool:
        return bool(self._value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __repr__(self) -> str:
        return "Secret('**********')"

    __str__ = __repr__


def _int_or_none(name: str, value: str | None) -> int | None:
    if value is None or str(value).strip() == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise ConfigError(f"{ENV_PREFIX}{name.upper()} must be a whole number, got {value!r}") from None


@dataclass(frozen=True)
class Settings:
    """Everything a run needs to know. Build with :meth:`from_env`."""

    base_url: str = SANDBOX
    appname: str = SANDBOX_APPNAME
    appkey: Secret = field(default_factory=lambda: Secret(SANDBOX_APPKEY))
    username: str = SANDBOX_USERNAME
    password: Secret = field(default_factory=lambda: Secret(SANDBOX_PASSWORD))
    format: Literal["json", "xml"] = "json"
    credentials_in: Literal["headers", "query"] = "headers"
    data_dir: Path = Path("data")
    watchlist: Path = Path("watchlist.yaml")
    max_searches_per_run: int | None = None
    reserve_searches: int = 0
    concurrency: int = 4
    timeout_s: float = 30.0
    max_attempts: int = 5
    retry_initial_wait_s: float = 0.5
    retry_max_wait_s: float = 30.0
    retry_max_total_s: float = 120.0

    @property
    def is_sandbox(self) -> bool:
        return self.base_url == SANDBOX

    @property
    def source(self) -> str:
        """Where the data comes from, as the lake records it: synthetic and live never mix."""
        if self.is_sandbox or self.base_url.startswith("sandbox:"):
            return "sandbox"
        return "live:" + self.base_url.rstrip("/")

    def with_overrides(self, **overrides: Any) -> Settings:
        """A copy with the given (non-None) values, coerced like environment values."""
        clean = {k: v for k, v in overrides.items() if v is not None}
        return _validated(replace(self, **_coerce(clean)))

    @classmethod
    def from_env(
        cls,
        env: Mapping[str, str] | None = None,
        dotenv_path: str | Path | None = ".env",
        **overrides: Any,
    ) -> Settings:
        """Read ``TOURNEYLAKE_*`` variables (a `.env` file first, the environment over it),
        then apply ``overrides`` (CLI flags)."""
        values: dict[str, str] = {}
        if dotenv_path is not None and Path(dotenv_path).is_file():
            values.update({k: v for k, v in dotenv_values(dotenv_path).items() if v is not None})
        values.update(os.environ if env is None else env)
        raw: dict[str, Any] = {}
        for f in fields(cls):
            key = ENV_PREFIX + f.name.upper()
            if key in values and values[key] != "":
                raw[f.name] = values[key]
        if "base_url" in raw and raw["base_url"] != SANDBOX and "appname" not in raw:
            raise ConfigError(f"{ENV_PREFIX}APPNAME must be set for a live service")
        raw.update({k: v for k, v in overrides.items() if v is not None})
        return _validated(cls(**_coerce(raw)))


def _coerce(raw: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in raw.items():
        if name in ("appkey", "password"):
            out[name] = value if isinstance(value, Secret) else Secret(str(value))
        elif name in ("data_dir", "watchlist"):
            out[name] = Path(value)
        elif name == "max_searches_per_run":
            out[name] = _int_or_none(name, value) if not isinstance(value, int) else value
        elif name in ("reserve_searches", "concurrency", "max_attempts"):
            parsed = value if isinstance(value, int) else _int_or_none(name, value)
            out[name] = 0 if parsed is None else parsed
        elif name in ("timeout_s", "retry_initial_wait_s", "retry_max_wait_s", "retry_max_total_s"):
            try:
                out[name] = float(value)
            except ValueError:
                raise ConfigError(f"{ENV_PREFIX}{name.upper()} must be a number, got {value!r}") from None
        elif name == "format":
            out[name] = str(value).lower()
        else:
            out[name] = value
    return out


def _validated(settings: Settings) -> Settings:
    if settings.format not in ("json", "xml"):
        raise ConfigError(f"{ENV_PREFIX}FORMAT must be 'json' or 'xml', got {settings.format!r}")
    if settings.credentials_in not in ("headers", "query"):
        raise ConfigError(f"{ENV_PREFIX}CREDENTIALS_IN must be 'headers' or 'query'")
    if settings.concurrency < 1:
        raise ConfigError(f"{ENV_PREFIX}CONCURRENCY must be at least 1")
    if settings.reserve_searches < 0:
        raise ConfigError(f"{ENV_PREFIX}RESERVE_SEARCHES must not be negative")
    if settings.max_searches_per_run is not None and settings.max_searches_per_run < 0:
        raise ConfigError(f"{ENV_PREFIX}MAX_SEARCHES_PER_RUN must not be negative")
    if settings.max_attempts < 1:
        raise ConfigError(f"{ENV_PREFIX}MAX_ATTEMPTS must be at least 1")
    if settings.appkey and settings.appkey.reveal() != settings.appkey.reveal().lower():
        raise ConfigError(f"{ENV_PREFIX}APPKEY must be lowercase (the service issues it so)")
    return settings
