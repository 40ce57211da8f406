"""Several service accounts sharing one watchlist.

A watchlist may list ``accounts:`` (:class:`~tourneylake.night.watchlist.AccountDef`); each
player is then harvested by exactly one of them, chosen by rendezvous (highest-random-weight)
hashing of the player with each account's name (:func:`assign`): deterministic on every machine
and night (a keyed BLAKE2b digest, never Python's salted ``hash``), so a player's history stays
with one account's ledger; adding an account moves only the players it now wins (about 1 in
n+1), removing one moves only its own; a player's filters all go to one account. Each account
has its own settings (:func:`account_settings`), so its own budget, ledger rows (its *name*,
never its secret), Dagster pool and reconciliation: one account's wrong password or exhausted
quota stops that account only. A night's split is computed once (:func:`save_shares`, the
``player_shares`` step) and each account's harvest reads its own share (:func:`load_share`).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable

from tourneylake.config import ENV_PREFIX, Settings
from tourneylake.errors import ConfigError, LakeError
from tourneylake.lake.lake import Lake
from tourneylake.lake.state import StateStore
from tourneylake.night.watchlist import AccountDef, WatchedPlayer, Watchlist, player_key

__all__ = ["account_settings", "assign", "load_share", "save_shares", "score", "share_of", "shares_digest"]

#: The state document of one account's share (see :func:`save_shares`).
SHARE_DOCUMENT = "shares-{account}"


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


def shares_digest(watchlist: Watchlist) -> str:
    """What a player split depends on (the accounts' names, the players in order), as a digest:
    a share saved for another watchlist is never used."""
    digest = hashlib.blake2b(digest_size=16)
    for account in watchlist.accounts:
        digest.update(f"a\x1f{account.name}\x1e".encode())
    for player in watchlist.players:
        digest.update("\x1f".join(("p", *player_key(player.network, player.name))).encode() + b"\x1e")
    return digest.hexdigest()


def save_shares(lake: Lake, watchlist: Watchlist) -> dict[str, int]:
    """Split the watchlist's players between its accounts once (:func:`assign`) and keep each
    account's share (the players' places in the watchlist) in the lake's state, for its harvest
    to read (:func:`load_share`); returns the players per account."""
    digest = shares_digest(watchlist)
    names = [account.name for account in watchlist.accounts]
    place = {id(player): index for index, player in enumerate(watchlist.players)}
    shares = assign(watchlist.players, names)
    store = StateStore(lake)
    for name, players in shares.items():
        store.write(SHARE_DOCUMENT.format(account=name), {"shares": digest, "players": [place[id(p)] for p in players]})
    return {name: len(players) for name, players in shares.items()}


def load_share(lake: Lake, watchlist: Watchlist, account: str) -> tuple[Watchlist, str]:
    """``account``'s share of the watchlist as :func:`save_shares` kept it, and the split's
    digest; computed here (:func:`share_of`) when none was kept for this watchlist (an account's
    night re-run alone after the watchlist changed, say)."""
    digest = shares_digest(watchlist)
    try:
        kept = StateStore(lake).read(SHARE_DOCUMENT.format(account=account))
    except (LakeError, OSError):
        kept = {}
    places = kept.get("players")
    if kept.get("shares") != digest or not isinstance(places, list):
        return share_of(watchlist, account), digest
    players = [watchlist.players[index] for index in places]
    return Watchlist(filters=watchlist.filters, players=players, source=watchlist.source, accounts=watchlist.accounts), digest


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
