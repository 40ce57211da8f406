"""Dagster resources: the service account and the local data, configured through ``EnvVar``."""


import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import fields
from datetime import date
from typing import Any

from dagster import ConfigurableResource, EnvVar, InitResourceContext
from pydantic import PrivateAttr

from tourneylake.config import ENV_PREFIX, Settings
from tourneylake.night import Night
from tourneylake.service import connect
from tourneylake.warehouse import Warehouse
from tourneylake.watchlist import Watchlist, load_watchlist


_INT_FIELDS = ("max_searches_per_run", "reserve_searches", "concurrency", "max_attempts", "sandbox_seed")
_FLOAT_FIELDS = ("timeout_s", "retry_initial_wait_s", "retry_max_wait_s", "retry_max_total_s")


class TourneylakeResource(ConfigurableResource):
    """The service account, budget and data directory for a run.

    With ``base_url="sandbox"`` the built-in emulator is started once per run, on the first
    asset that needs it, with its clock pinned to the partition's date, and stopped when the
    run ends, so every asset of a run talks to the same emulator.
    """

    base_url: str = "sandbox"
    appname: str | None = None
    appkey: str | None = None
    username: str | None = None
    password: str | None = None
    format: str = "json"
    data_dir: str = "data"
    watchlist: str = "watchlist.yaml"
    max_searches_per_run: int | None = None
    reserve_searches: int = 0
    concurrency: int = 4
    credentials_in: str = "headers"
    timeout_s: float = 30.0
    max_attempts: int = 5
    retry_initial_wait_s: float = 0.5
    retry_max_wait_s: float = 30.0
    retry_max_total_s: float = 120.0
    sandbox_seed: int = 7

    _stack: ExitStack | None = PrivateAttr(default=None)
    _endpoint: Any = PrivateAttr(default=None)

    @classmethod
    def from_env(cls) -> "TourneylakeResource":
        """Every field set in the environment is bound through ``EnvVar`` (so Dagster shows the
        variable's name, never its value); the rest keep their defaults."""
        bound: dict[str, Any] = {}
        for name in cls.model_fields:
            env = ENV_PREFIX + name.upper()
            if os.environ.get(env):
                if name in _FLOAT_FIELDS:  # not secret; Dagster's EnvVar has no float form
                    bound[name] = float(os.environ[env])
                else:
                    bound[name] = EnvVar.int(env) if name in _INT_FIELDS else EnvVar(env)
        return cls(**bound)

    @classmethod
    def from_settings(cls, settings: Settings, sandbox_seed: int = 7) -> "TourneylakeResource":
        values = {f.name: getattr(settings, f.name) for f in fields(Settings)}
        values.update(appkey=settings.appkey.reveal(), password=settings.password.reveal())
        values.update(data_dir=str(settings.data_dir), watchlist=str(settings.watchlist))
        return cls(**values, sandbox_seed=sandbox_seed)

    def settings(self) -> Settings:
        return Settings().with_overrides(**{f.name: getattr(self, f.name) for f in fields(Settings)})

    def _base_url(self, snapshot_date: date) -> str:
        if self._endpoint is None:
            self._stack = ExitStack()
            self._endpoint = self._stack.enter_context(
                connect(self.settings(), today=snapshot_date, seed=self.sandbox_seed)
            )
        elif self._endpoint.sandbox is not None:
            self._endpoint.sandbox.world.set_today(snapshot_date)
        return self._endpoint.base_url

    def night(self, snapshot_date: date) -> Night:
        return Night(self.settings(), self._base_url(snapshot_date), snapshot_date)

    def load_watchlist(self) -> Watchlist:
        return load_watchlist(self.watchlist)

    @contextmanager
    def warehouse(self) -> Iterator[Warehouse]:
        warehouse = Warehouse(self.settings().data_dir / "warehouse.duckdb")
        try:
            yield warehouse
        finally:
            warehouse.close()

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        if self._stack is not None:
            self._stack.close()
            self._stack = None
            self._endpoint = None
