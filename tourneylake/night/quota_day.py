"""The service's quota day: every daily search quota is reset at one instant (08:00 UTC).

The searches an account holds between two resets are its quota day's; what is left at the reset
is lost, and a nightly run at 03:00 UTC spends from a quota day that began at 08:00 the day before
and ends five hours later. :class:`QuotaDay` is the plain answer to "when is the next reset, and
how many searches expire at it" (the run summary, ``tourneylake budget``, ``status``); it is
counted on the service's clock (its answers' timestamps, :func:`tourneylake.api.server_clock.server_now`)
when one is known, else on ours. :func:`quota_day_of` names the quota day a moment belongs to (the
date its reset fell on): the ledger's ``quota_day`` column, so the bill adds up per quota day.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from tourneylake.api.server_clock import server_now
from tourneylake.config import Settings

__all__ = ["QuotaDay", "next_reset", "next_scheduled", "quota_day", "quota_day_of", "service_now"]

DAY = timedelta(days=1)


def _offset(reset_s: int) -> timedelta:
    return timedelta(seconds=reset_s)


def quota_day_of(moment: datetime, reset_s: int) -> date:
    """The quota day ``moment`` belongs to, named by the date of the reset that began it."""
    return (moment.astimezone(UTC) - _offset(reset_s)).date()


def next_reset(moment: datetime, reset_s: int) -> datetime:
    """The first reset after ``moment`` (a reset at ``moment`` itself is the next day's)."""
    day = quota_day_of(moment, reset_s)
    return datetime(day.year, day.month, day.day, tzinfo=UTC) + _offset(reset_s) + DAY


def next_scheduled(cron: str, now: datetime) -> datetime:
    """The next tick of a daily ``M H * * *`` schedule (UTC) after ``now``."""
    minute, hour = (int(part) for part in cron.split()[:2])
    tick = now.astimezone(UTC).replace(hour=hour, minute=minute, second=0, microsecond=0)
    return tick if tick > now else tick + DAY


def service_now(base_url: str | None) -> datetime:
    """The service's clock as its latest answer told it, else ours."""
    return (server_now(base_url) if base_url else None) or datetime.now(UTC)


@dataclass(frozen=True)
class QuotaDay:
    """Where an account stands in its quota day: ``remaining`` searches left at ``now`` (``None``:
    unknown), all of which expire at ``reset_at``; ``reserve`` is never spent."""

    now: datetime
    reset_at: datetime
    remaining: int | None
    reserve: int = 0

    @property
    def day(self) -> date:
        """The quota day (the date of the reset that began it)."""
        return (self.reset_at - DAY).date()

    @property
    def seconds_left(self) -> float:
        return max((self.reset_at - self.now).total_seconds(), 0.0)

    @property
    def expiring(self) -> int | None:
        """Searches that expire at the reset, used or not: every one left now."""
        return self.remaining

    @property
    def spendable(self) -> int | None:
        """What may be spent before the reset without crossing the reserve."""
        return None if self.remaining is None else max(self.remaining - self.reserve, 0)

    def describe(self) -> str:
        """One line for people: the reset and what expires at it."""
        hours, rest = divmod(round(self.seconds_left / 60), 60)
        when = f"{self.reset_at:%Y-%m-%d %H:%M} UTC (in {hours} h {rest:02d} min)"
        if self.remaining is None:
            return f"Next quota reset {when}; searches left unknown"
        return f"Next quota reset {when}: the {self.remaining:,} searches left expire at it"


def quota_day(settings: Settings, remaining: int | None, *, base_url: str | None = None, now: datetime | None = None) -> QuotaDay:
    """The account's quota day now (the service's clock when ``base_url`` has answered in this
    process), with ``remaining`` searches left and the settings' reserve."""
    moment = now or service_now(base_url)
    return QuotaDay(moment, next_reset(moment, settings.quota_reset_s), remaining, settings.reserve_searches)
