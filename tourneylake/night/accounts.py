"""Several service accounts sharing one watchlist.

A watchlist may list ``accounts:`` (:class:`~tourneylake.night.watchlist.AccountDef`); each
player is then harvested by exactly one of them, chosen by rendezvous (highest-random-weight)
hashing of the player with each account's name (:func:`assign`): deterministic on every machine
and night (a keyed BLAKE2b digest, never Python's salted ``hash``), so a player's history stays
with one account's ledger; adding an account moves only the players it now wins (about 1 in
n+1), removing one moves only its own; a player's filters all go to one account. Each account
has its own settings (:func:`account_settings`), so its own budget, ledger rows (its *name*,
never its secret), Dagster pool and reconciliation: one account's wrong password or exhausted
quota stops that account only.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable

from tourneylake.config import ENV_PREFIX, Settings
from tourneylake.errors import ConfigError
from tourneylake.night.watchlist import AccountDef, WatchedPlayer, Watchlist, player_key

__all__ = ["account_settings", "assign", "score", "share_of"]


def score(account: str, player: WatchedPlayer) -> int:
    """The rendezvous weight of ``player`` for ``account`` (higher wins)."""
    network, name = player_key(player.network, player.name)
    digest = hashlib.blake2b(f"{network}\x1f{name}".encode(), digest_size=8, key=account.encode()[:64]).digest()
    return int.from_bytes(digest, "big")


def assign(players: Iterable[WatchedPlayer], accounts: Iterable[str]) -> dict[str, list[WatchedPlayer]]:
    """Each account's players (in watchlist order); every player goes to exactly one account."""
    names = list(accounts)
    if not names:
        raise ValueError("no accounts to assign players to")
    shares: dict[str, list[WatchedPlayer]] = {name: [] for name in names}
    for player in players:
        # A tie (a 1 in 2**64 chance) goes to the name that sorts last: the choice stays total.
        best = max(names, key=lambda name: (score(name, player), name))
        shares[best].append(player)
    return shares


def share_of(watchlist: Watchlist, account: str) -> Watchlist:
    """The watchlist with only ``account``'s players (filters and accounts unchanged)."""
    names = [a.name for a in watchlist.accounts]
    if account not in names:
        raise ConfigError(f"account {account!r} is not in the watchlist's accounts ({', '.join(names) or 'none'})")
    players = assign(watchlist.players, names)[account]
    return Watchlist(filters=watchlist.filters, players=players, source=watchlist.source, accounts=watchlist.accounts)


def _secret(variable: str, what: str, account: str) -> str:
    value = os.environ.get(variable)
    if not value:
        raise ConfigError(f"account {account!r}: {what} is read from ${variable}, which is not set")
    return value


def account_settings(settings: Settings, account: AccountDef) -> Settings:
    """The settings one account's calls use: its credentials (read from the environment
    variables it names), its cap, reserve and concurrency; everything else as ``settings``.
    A missing variable is a one-line :class:`ConfigError` naming it (never a value)."""
    overrides: dict[str, object] = {
        "username": account.username,
        "password": _secret(account.password_env, "the password", account.name),
        "appname": account.appname,
        "appkey": _secret(account.appkey_env, "the app key", account.name) if account.appkey_env else None,
        "max_searches_per_run": account.max_searches_per_run,
        "reserve_searches": account.reserve_searches,
        "concurrency": account.concurrency,
    }
    try:
        return settings.with_overrides(**overrides)
    except ConfigError as exc:
        raise ConfigError(f"account {account.name!r}: {str(exc).removeprefix(ENV_PREFIX)}") from None
