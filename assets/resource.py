"""The Dagster resource: :class:`tourneylake.config.Settings` as Dagster config, nothing re-declared.

Its config fields are generated from the settings' fields (same names, each optional: unset means
"whatever the environment, `.env` or the default says"), so a setting added to ``Settings``
appears here by itself. :meth:`TourneylakeResource.from_env` binds every ``TOURNEYLAKE_*``
variable that is set through ``EnvVar``, so Dagster's UI and event log show the variable's name,
never a secret's value.

With ``base_url="sandbox"`` the built-in emulator is started once per run, on the first asset
that needs it, with its clock pinned to the partition's night, and stopped when the run ends, so
every asset of a run talks to the same emulator.
"""

from __future__ import annotations

import os
import types
import typing
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import date
from pathlib import Path
from typing import Any, Literal, Self

from dagster import ConfigurableResource, EnvVar, InitResourceContext
from pydantic import Field, PrivateAttr, SecretStr, create_model

from tourneylake.config import ENV_PREFIX, Settings, load_settings
from tourneylake.errors import ConfigError
from tourneylake.lake.lake import Lake
from tourneylake.night.accounts import account_settings
from tourneylake.night.endpoint import connect
from tourneylake.night.session import Session
from tourneylake.night.watchlist import Watchlist, load_watchlist
from tourneylake.tables.warehouse import Warehouse


def _config_type(annotation: Any) -> type:
    """The Dagster config type of a settings field: secrets, paths and choices are text."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return _config_type(args[0])
    if annotation in (int, float, bool):
        return annotation
    if annotation in (str, SecretStr, Path, date) or typing.get_origin(annotation) is Literal:
        return str
    raise TypeError(f"no Dagster config type for a setting of type {annotation!r}")


SETTING_FIELDS: dict[str, type] = {name: _config_type(field.annotation) for name, field in Settings.model_fields.items()}
SECRET_FIELDS = frozenset(
    name for name, field in Settings.model_fields.items() if SecretStr in (field.annotation, *typing.get_args(field.annotation))
)

# Settings handed over in-process by `tourneylake run`: the run finds them by a key, so Dagster's
# run config — which a persistent instance stores and its UI shows — never holds a secret.
_HANDED_OVER: dict[str, Settings] = {}


class _ServiceResource(ConfigurableResource):
    """The service account, budget and data directory for a run (see the module docstring)."""

    sandbox_seed: int = 7
    settings_key: str | None = Field(
        None, description="settings handed over in-process by `tourneylake run` (secrets never go into config)"
    )

    _stack: ExitStack | None = PrivateAttr(default=None)
    _endpoint: Any = PrivateAttr(default=None)

    @classmethod
    def from_env(cls) -> Self:
        """Every setting set in the environment, bound through ``EnvVar``; the rest unset."""
        bound: dict[str, Any] = {}
        for name, kind in SETTING_FIELDS.items():
            variable = ENV_PREFIX + name.upper()
            if os.environ.get(variable):
                if kind is int:
                    bound[name] = EnvVar.int(variable)
                elif kind is str:
                    bound[name] = EnvVar(variable)
                # other kinds stay unset: Settings reads the variable itself
        return cls(**bound)

    @classmethod
    def from_settings(cls, settings: Settings, sandbox_seed: int = 7) -> Self:
        """A resource for an in-process run with these settings: the non-secret ones shown as
        config, the whole object handed over by key (see ``_HANDED_OVER``)."""
        key = uuid.uuid4().hex
        _HANDED_OVER[key] = settings
        shown = {name: getattr(settings, name) for name in SETTING_FIELDS if name not in SECRET_FIELDS}
        shown = {name: str(value) if isinstance(value, Path | date) else value for name, value in shown.items()}
        return cls(**shown, settings_key=key, sandbox_seed=sandbox_seed)

    def settings(self) -> Settings:
        if self.settings_key is not None:
            try:
                return _HANDED_OVER[self.settings_key]
            except KeyError:
                raise ConfigError(
                    "this resource's settings were handed over in-process by `tourneylake run` and are not in this "
                    "process: run it in-process, or configure the resource through TOURNEYLAKE_* variables"
                ) from None
        return load_settings(**{name: getattr(self, name) for name in SETTING_FIELDS})

    def _base_url(self, night: date) -> str:
        if self._endpoint is None:
            # Before the run's first call: a lake at a URL needs TOURNEYLAKE_WAREHOUSE, and a run
            # launched from the UI must say so before it pays for a search, not at its last step.
            _ = self.settings().warehouse_path
            self._stack = ExitStack()
            self._endpoint = self._stack.enter_context(connect(self.settings(), today=night, seed=self.sandbox_seed))
        elif self._endpoint.sandbox is not None:
            self._endpoint.sandbox.world.set_today(night)
        return self._endpoint.base_url

    def session(self, night: date) -> Session:
        return Session.open(self.settings(), self._base_url(night), night)

    def account_session(self, night: date, account: str) -> Session:
        """A session with one watchlist account's credentials and limits (its ledger rows carry
        its name); the service (or the built-in sandbox) is the run's."""
        definition = next((a for a in self.load_watchlist().accounts if a.name == account), None)
        if definition is None:
            raise ConfigError(f"account {account!r} is no longer in the watchlist's accounts: reload the code location")
        settings = account_settings(self.settings(), definition)
        return Session.open(settings, self._base_url(night), night, account=account)

    def lake(self) -> Lake:
        return Lake.of(self.settings())

    def load_watchlist(self) -> Watchlist:
        return load_watchlist(self.settings().watchlist)

    @contextmanager
    def open_warehouse(self) -> Iterator[Warehouse]:
        with Warehouse(self.settings().warehouse_path) as warehouse:
            yield warehouse

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        if self._stack is not None:
            self._stack.close()
            self._stack = None
            self._endpoint = None


TourneylakeResource = create_model(  # type: ignore[call-overload]
    "TourneylakeResource",
    __base__=_ServiceResource,
    __module__=__name__,
    **{
        name: (kind | None, Field(None, description=Settings.model_fields[name].description))
        for name, kind in SETTING_FIELDS.items()
    },
)
