"""One night's context: the clients on the service and the lake their answers go to.

Everything that calls the service for a night goes through a :class:`Session`, so the product's
promises are kept in one place: every HTTP 200 body is written to the lake's raw store by the
client's ``on_body`` hook before it is parsed, and named by its status once its envelope has
been read; the account's searches left are read from a free authenticated call, only from a
``loggedIn="true"`` answer; every metered attempt goes through the session's :class:`Meter`
(budget gate, ledger rows, reconciliations: :mod:`tourneylake.night.metering`). An answer already
paid for is taken from the lake, and a question's filter from its cache.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from tourneylake.api import ApiError, AsyncClient, Client, CredentialsError, ReceivedBody, calls
from tourneylake.api.answers import call_payload
from tourneylake.api.client import recent_reading, warm_async_transport
from tourneylake.api.errors import UnusableResponse
from tourneylake.api.tree import Node, parse
from tourneylake.config import Settings
from tourneylake.errors import RunFailed
from tourneylake.lake.lake import Lake
from tourneylake.lake.ledger import LedgerWriter
from tourneylake.lake.legacy import sweep_tmp
from tourneylake.lake.raw import UNUSABLE
from tourneylake.lake.raw_saver import RawSaver, saver_wanted
from tourneylake.lake.state import StateStore
from tourneylake.night.budget import Budget
from tourneylake.night.metering import Meter
from tourneylake.night.quota_day import QuotaDay, quota_day, service_now
from tourneylake.tables.normalize.metadata import normalize_metadata
from tourneylake.tables.reference import InForce

__all__ = ["Session", "connected", "metadata_is_current", "metadata_night", "new_run_id", "today"]

log = logging.getLogger(__name__)

#: How old a free answer's count of searches left may be to stand for a new reading (seconds).
RECENT_READING_S = 5.0

NLQ_CACHE = "nlq_cache"


def today() -> date:
    return datetime.now(UTC).date()


def new_run_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]


@dataclass
class Session:
    """The context of one night's calls. Build with :meth:`open`."""

    settings: Settings
    base_url: str
    night: date
    lake: Lake
    writable: bool = True
    run_id: str = field(default_factory=new_run_id)
    #: The watchlist account whose settings these are (``None``: the settings' one account).
    account: str | None = None
    meter: Meter = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.meter = Meter.open(
            self.settings,
            self.lake,
            self.night,
            self.run_id,
            self.account,
            self.read_remaining,
            writable=self.writable,
            clock=lambda: service_now(self.base_url),
        )

    @classmethod
    def open(
        cls, settings: Settings, base_url: str, night: date, *, writable: bool = True, account: str | None = None
    ) -> Session:
        """A session on the settings' lake; ``writable`` claims it for the settings' source
        (a read-only session writes nothing, not even raw bodies of free calls)."""
        lake = Lake.of(settings)
        if writable:
            lake.claim(settings.source)
            sweep_tmp(lake.root)
            warm_async_transport()  # a night's session: its harvest will want the async client
        return cls(settings, base_url, night, lake, writable, account=account)

    @property
    def state(self) -> StateStore:
        return StateStore(self.lake)

    def in_force(self) -> InForce:
        """The reference data in force tonight, as the lake holds it now."""
        return InForce(self.lake, self.night)

    def checked_against(self) -> tuple[InForce, str]:
        """The reference data to check filters and networks against before anything is paid,
        and what it is, in words: the lake's when it holds the night's metadata or the night
        before's; else the service's own (its Metadata resource is free and needs no
        credentials), read now and kept nowhere (a check is no night); else, when the service
        cannot be read, the lake's older copy, or none (syntax only)."""
        lake_copy = self.in_force()
        held = metadata_night(self.lake, self.night)
        if metadata_is_current(self.lake, self.night):
            return lake_copy, f"the lake's metadata of {held}"
        try:
            with Client(self.settings, base_url=self.base_url) as client:  # no body saver: kept nowhere
                tables = normalize_metadata(client.metadata().root, self.night)
        except (ApiError, ValueError) as exc:
            if held is not None:
                log.warning("the service's metadata could not be read (%s): checked against the lake's of %s", exc, held)
                return lake_copy, f"the lake's metadata of {held} (the service's could not be read: {exc})"
            log.warning("the service's metadata could not be read (%s): filters checked for syntax only", exc)
            return lake_copy, f"no metadata (the service's could not be read: {exc}): syntax only, networks not checked"
        return InForce(self.lake, self.night, own=tables), "the service's metadata (free, read now)"

    # ------------------------------------------------------------------ clients
    def save_body(self, received: ReceivedBody) -> Callable[[str], object]:
        """The client's ``on_body`` hook: the body kept as received, and how to name it by its status."""
        ref = self.lake.raw.write(
            self.night, received.call.resource, received.call.key, received.body, received.format, received.fetched_at
        )
        return lambda status: self.lake.raw.settle(ref, status)

    def _hooks(self, hooks: dict[str, Any]) -> dict[str, Any]:
        return {"on_body": self.save_body, **hooks} if self.writable else hooks

    def client(self, **hooks: Any) -> Client:
        return Client(self.settings, base_url=self.base_url, **self._hooks(hooks))

    def async_client(self, *, calls: int | None = None, **hooks: Any) -> AsyncClient:
        """A client for a harvest of ``calls`` metered calls: a writable session's bodies are
        saved by a second process on a local lake when there are enough of them
        (:func:`tourneylake.lake.raw_saver.saver_wanted`), else on the client's threads."""
        if self.writable and saver_wanted(self.lake, calls):
            hooks["body_saver"] = RawSaver(self.lake, self.night)
        return AsyncClient(self.settings, base_url=self.base_url, **self._hooks(hooks))

    # ------------------------------------------------------------------ searches left
    def read_remaining(self, *, recent: bool = False) -> int | None:
        """The account's searches left, from the free authenticated Countries call (never a
        search). Wrong credentials end the night (:class:`RunFailed`); a failed call or an
        answer without a logged-in count is ``None`` (unknown).

        ``recent``: a free answer of this account from the last :data:`RECENT_READING_S` seconds
        in this process, with no search since (the night's metadata answer, say), is the reading
        instead: the round trip is overlapped with the free calls the night makes anyway."""
        if recent:
            found = recent_reading(self.settings, self.base_url, RECENT_READING_S)
            if found is not None:
                return found
        remaining, why = self.reading()
        if why is not None:
            log.warning("could not read the searches left: %s", why)
        return remaining

    def reading(self) -> tuple[int | None, str | None]:
        """:meth:`read_remaining` from the service, and why it is unknown when it is."""
        try:
            with self.client() as client:
                response = client.send(calls.countries(reading=True))
        except CredentialsError as exc:
            raise RunFailed(f"credentials refused by the service: {exc}") from None
        except ApiError as exc:
            return None, str(exc)
        info = response.envelope.user_info
        if info is not None and not info.logged_in:  # a free call answers bad credentials with loggedIn="false"
            raise RunFailed(
                "credentials refused by the service: it answered loggedIn=false (check user name, password and app key)"
            )
        if response.remaining_searches is None:
            return None, "the service did not report the account's RemainingSearches"
        return response.remaining_searches, None

    def quota_day(self, remaining: int | None) -> QuotaDay:
        """The account's quota day now, on the service's clock (see :mod:`~tourneylake.night.quota_day`)."""
        return quota_day(self.settings, remaining, base_url=self.base_url)

    def paid_payload(self, call: calls.Call, client: Client) -> Node | None:
        """The payload of ``call``'s answer: the one already paid for when the lake holds it (a
        run that died after paying, before keeping what it bought; another process that asked
        the same a moment ago), else from the service.

        A writable session looks and asks under the lake's lock for the resource, so two
        processes asking the same question (or analysing the same hand) pay once: the second
        waits, then finds the first one's answer saved (the client saves and settles a body
        before ``send`` returns)."""
        if not self.writable:
            return client.send(call).payload
        with self.lake.locks.hold(f"paid-{call.resource}"):
            return self._paid_payload(call, client)

    def _paid_payload(self, call: calls.Call, client: Client) -> Node | None:
        from tourneylake.tables.night_tables import settle_received  # the normalisers' module: not every command's

        # A body of this request left `received` (its run died before reading it) is paid
        # for: settled first, an accepted one is the answer (and is not paid for again).
        settle_received(self.lake, self.night, call.resource, call.key)
        raw = self.lake.raw.read(self.night, call.resource, call.key)
        if raw is None and call.resource == calls.HAND_ANALYSIS:
            # A hand's analysis does not depend on the night (a question's filter does: its
            # dates are the night's): one paid for on another night is the answer too.
            raw = next(
                (r for d in reversed(self.lake.raw.nights()) if (r := self.lake.raw.read(d, call.resource, call.key))),
                None,
            )
        if raw is None and self.lake.raw.request_refs(self.night, call.resource, call.key, UNUSABLE):
            # Complete, charged, and unreadable: the service would answer the same again.
            raise UnusableResponse(
                f"{call.describe()}: its answer tonight was paid for and could not be read (kept raw, "
                "marked unusable); not asked again tonight",
                resource=call.resource,
            )
        if raw is not None:
            log.info("%s: answered from the lake (paid for earlier)", call.describe())
            return call_payload(parse(raw.body, raw.fmt), call)
        return client.send(call).payload

    # ------------------------------------------------------------------ natural-language filters
    @staticmethod
    def _nlq_key(question: str | None, timezone: str | None, locale: str | None) -> str:
        return "\x1f".join([question or "", timezone or "", locale or ""])

    def cached_filter(self, question: str, timezone: str | None = None, locale: str | None = None) -> str | None:
        return self.state.read(NLQ_CACHE).get(self._nlq_key(question, timezone, locale))

    def ask_filter(
        self,
        question: str,
        timezone: str | None = None,
        locale: str | None = None,
        budget: Budget | None = None,
        ledger: LedgerWriter | None = None,
    ) -> str:
        """Convert a question to a filter: 1 search the first time, then from the cache (shared
        by the harvest and ``tourneylake filter ask``)."""
        cached = self.cached_filter(question, timezone, locale)
        if cached is not None:
            return cached
        hooks = self.meter.hooks(budget, ledger) if ledger is not None else {}
        with self.client(**hooks) as client:
            payload = self.paid_payload(calls.natural_language_filter(question, timezone, locale), client)
        expression = (payload.text if payload is not None else None) or ""
        if payload is not None and not payload.text:
            inner = payload.one("Filter")
            expression = (inner.text if inner is not None else "") or ""
        self.state.set_entry(NLQ_CACHE, self._nlq_key(question, timezone, locale), expression)
        return expression


def metadata_night(lake: Lake, night: date) -> date | None:
    """The night whose metadata the lake holds in force for ``night`` (``None``: none)."""
    if not lake.exists:
        return None
    held = [d for d in lake.tables.nights("currencies") if d <= night]  # written last of the metadata tables
    return held[-1] if held else None


def metadata_is_current(lake: Lake, night: date) -> bool:
    """Whether the lake's metadata in force for ``night`` is the night's own or the night before's."""
    held = metadata_night(lake, night)
    return held is not None and held >= night - timedelta(days=1)


@contextmanager
def connected(settings: Settings, night: date | None = None, *, writable: bool) -> Iterator[Session]:
    """A session on the service: the live one, or a sandbox started for this call only (its
    clock on ``night``) when the settings say ``sandbox``."""
    from tourneylake.night.endpoint import connect

    with connect(settings, today=night) as endpoint:
        yield Session.open(settings, endpoint.base_url, night or today(), writable=writable)
