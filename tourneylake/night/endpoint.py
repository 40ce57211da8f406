"""Where the service is: a live URL, or the built-in sandbox started in-process on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date
from typing import Any

from tourneylake.config import Settings


@dataclass(frozen=True)
class Endpoint:
    base_url: str
    sandbox: Any | None  # the running SandboxServer when in-process, for tests and demos


@contextmanager
def connect(settings: Settings, *, today: date | None = None, seed: int = 7, players: int | None = None) -> Iterator[Endpoint]:
    """Yield the service's base URL; for ``base_url=sandbox`` start the emulator on an
    ephemeral loopback port (its clock pinned to ``today``) and stop it afterwards."""
    if not settings.is_sandbox:
        yield Endpoint(settings.base_url.rstrip("/"), None)
        return
    from tourneylake.sandbox import running_sandbox  # imported lazily: live runs never need it

    kwargs: dict[str, Any] = {"seed": seed, "today": today, "quota_reset_s": settings.quota_reset_s}
    if players is not None:
        kwargs["players"] = players
    with running_sandbox(**kwargs) as server:
        yield Endpoint(server.base_url, server)
