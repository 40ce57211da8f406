"""Applications, users, subscriptions, daily quotas and in-flight sessions of the sandbox.

Credentials follow the service: the application name is in the path, the
application key only encodes the password, and a request carries ``Username`` and ``Password``
(headers or query parameters). Quotas are daily, and every one resets at the same instant,
``quota_reset_s`` after midnight UTC (08:00 by default: the service's FAQ says "12 Midnight PST
(GMT -8)"): a user's first request of a new quota day resets their remaining searches. The quota
clock is the world's (set its day and ``time_of_day`` to stand before or after a reset); when
only its date is pinned, the quota day is the one that began at the reset on that date,
whatever the real hour, so no test crosses a reset at a moment it did not choose. One lock
guards everything, so tests can adjust accounts from their own thread while the server runs,
and read each user's requests in flight and their peak.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from time import time as real_time
from typing import Literal

from tourneylake.api.client import encode_password  # one rule for both sides of the wire
from tourneylake.sandbox.world import DAY, World, day_start

__all__ = ["DEMO", "FREE", "Accounts", "App", "DemoAccount", "User", "encode_password"]

Level = Literal["none", "subscriber", "gold"]


@dataclass(frozen=True)
class DemoAccount:
    """A published sandbox account (safe to print: it only opens the local emulator)."""

    appname: str
    appkey: str
    username: str
    password: str

    @property
    def encoded_password(self) -> str:
        return encode_password(self.password, self.appkey)


#: The demo account the README publishes: a subscriber with a large daily quota.
DEMO = DemoAccount("demo", "sandboxkey2026", "analyst@example.com", "correct-horse-battery")
#: A non-subscriber with a small daily quota (on the demo application).
FREE = DemoAccount("demo", "sandboxkey2026", "free@example.com", "free-password")
FREE_QUOTA = 10
#: When every daily quota resets, in seconds after midnight UTC: 08:00 ("12 Midnight PST (GMT -8)").
QUOTA_RESET_S = 8 * 3600


@dataclass
class App:
    name: str
    key: str
    version: str = "1.0"


@dataclass
class User:
    username: str
    password: str
    level: Level = "subscriber"
    daily_quota: int = 1000
    remaining: int = 1000
    expiration: int | None = None
    country: str = "GB"
    quota_day: date | None = None
    in_flight: int = 0
    peak_in_flight: int = 0  # the most requests in flight at once since the last reset
    charged: int = field(default=0)  # searches charged since the server started

    @property
    def subscribed(self) -> bool:
        return self.level in ("subscriber", "gold")


class Accounts:
    """The sandbox's applications and users (thread-safe)."""

    def __init__(self, world: World, demo_quota: int = 100_000, *, quota_reset_s: int = QUOTA_RESET_S) -> None:
        self.world = world
        self.quota_reset_s = quota_reset_s
        self._lock = threading.Lock()
        self.apps: dict[str, App] = {}
        self.users: dict[str, User] = {}
        expires = day_start(world.today + timedelta(days=365))
        self.add_app(DEMO.appname, DEMO.appkey)
        self.add_user(DEMO.username, DEMO.password, "subscriber", demo_quota, expiration=expires)
        self.add_user(FREE.username, FREE.password, "none", FREE_QUOTA, country="DE")

    # ------------------------------------------------------------------------------- admin

    def add_app(self, name: str, key: str, version: str = "1.0") -> App:
        app = App(name, key.lower(), version)
        with self._lock:
            self.apps[name] = app
        return app

    def add_user(
        self,
        username: str,
        password: str,
        level: Level = "subscriber",
        daily_quota: int = 1000,
        *,
        remaining: int | None = None,
        expiration: int | None = None,
        country: str = "GB",
    ) -> User:
        if level not in ("none", "subscriber", "gold"):
            raise ValueError(f"unknown subscription level {level!r}")
        if expiration is None and level != "none":
            expiration = day_start(self.world.today + timedelta(days=365))
        user = User(
            username,
            password,
            level,
            daily_quota,
            daily_quota if remaining is None else remaining,
            expiration,
            country,
            self.quota_day(),
        )
        with self._lock:
            self.users[username] = user
        return user

    def set_remaining(self, username: str, remaining: int) -> None:
        """Set the user's remaining searches for the current simulated day."""
        with self._lock:
            user = self.users[username]
            user.remaining = remaining
            user.quota_day = self.quota_day()

    def remaining(self, username: str) -> int:
        with self._lock:
            user = self.users[username]
            self._roll(user)
            return user.remaining

    # ------------------------------------------------------------------------------- requests

    def now(self) -> int:
        """The quota clock, epoch seconds (see the module docstring): also the answers' timestamp,
        so a client reading the service's clock counts the same quota day as the service."""
        world = self.world
        if world.time_of_day is None and world.today != datetime.now(UTC).date():
            # Only the date is pinned: that day's quota day, at the real time of day once past its
            # reset (at the reset itself before it: never the quota day before).
            return day_start(world.today) + max(self.quota_reset_s, int(real_time()) % DAY)
        return world.timestamp()

    def quota_day(self) -> date:
        """The current quota day, named by the date of the reset that began it."""
        return date.fromordinal(date(1970, 1, 1).toordinal() + (self.now() - self.quota_reset_s) // DAY)

    def _roll(self, user: User) -> None:
        current = self.quota_day()
        if user.quota_day != current:
            user.quota_day = current
            user.remaining = user.daily_quota

    def authenticate(self, appname: str, username: str | None, password: str | None) -> tuple[User | None, int]:
        """(user, 0) when the credentials are valid, else (None, error code)."""
        app = self.apps.get(appname)
        if app is None:
            return None, 101012
        if not username or not password:
            return None, 101003
        with self._lock:
            user = self.users.get(username)
            if user is None:
                return None, 101001
            if password != encode_password(user.password, app.key):
                return None, 101002
            self._roll(user)
            return user, 0

    def quota_error(self, user: User, cost: int) -> int:
        """The error a call costing ``cost`` meets (0 when it can be paid). Charges nothing."""
        with self._lock:
            self._roll(user)
            if user.remaining <= 0:
                return 102002 if user.subscribed else 102001
            if user.remaining < cost:
                return 102006
            return 0

    def charge(self, user: User, cost: int) -> bool:
        """Take ``cost`` searches if the user has them; False (nothing taken) otherwise."""
        if cost <= 0:
            return True
        with self._lock:
            self._roll(user)
            if user.remaining < cost:
                return False
            user.remaining -= cost
            user.charged += cost
            return True

    def enter(self, username: str) -> int:
        """Count a request in flight for ``username``; returns how many are now in flight."""
        with self._lock:
            user = self.users.get(username)
            if user is None:
                return 0
            user.in_flight += 1
            user.peak_in_flight = max(user.peak_in_flight, user.in_flight)
            return user.in_flight

    def reset_peak(self, username: str | None = None) -> None:
        """Start counting the peak of requests in flight afresh (for a test's measurement): for
        ``username``, or for every user when ``None``. The peak restarts from the requests in
        flight right now (0 when the server is idle)."""
        with self._lock:
            users = self.users.values() if username is None else (self.users[username],)
            for user in users:
                user.peak_in_flight = user.in_flight

    def peak_in_flight(self, username: str) -> int:
        """The most requests ``username`` had in flight at once since the last reset."""
        with self._lock:
            return self.users[username].peak_in_flight

    def leave(self, username: str) -> None:
        with self._lock:
            user = self.users.get(username)
            if user is not None and user.in_flight > 0:
                user.in_flight -= 1
