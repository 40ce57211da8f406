"""The sandbox's HTTP face: a Starlette app for every resource under ``/api/{appname}/``.

:class:`SandboxApp` routes a request, negotiates its format, applies the faults, checks the
user agent, application, credentials, sessions, subscription, the request and the quota, in that
order (each step's failure is the answer), and only then does the work and charges the search.
Errors are HTTP 200 envelopes with ``success="false"``; a malformed call gets HTTP 404 or 405.
It also records what tests read of what it saw (every summary request, requests in flight). The
order, the error codes, what costs a search and the metadata cache marker are written down in
``docs/reference/sandbox.md``.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from tourneylake.api.tree import Element, to_json, to_xml
from tourneylake.sandbox import catalog, handanalysis, nlq
from tourneylake.sandbox.accounts import Accounts, User
from tourneylake.sandbox.faults import FaultPlan, Faults
from tourneylake.sandbox.filtering import FilterNotSupported, compile_filter
from tourneylake.sandbox.metadata import DayMetadata, MetadataBook
from tourneylake.sandbox.responses import (
    envelope,
    error_element,
    fragment,
    render,
    summary_payload,
    user_info,
)
from tourneylake.sandbox.world import World

__all__ = ["Costs", "DroppedConnection", "SandboxApp", "SummaryRequest", "negotiate"]

_MEDIA = {"json": "application/json; charset=utf-8", "xml": "application/xml; charset=utf-8"}


@dataclass(frozen=True)
class Costs:
    """Searches each metered call costs; ``no_data``: a lookup that returns no data (an unknown
    player, a player who opted out, a network gone), 1 like a search or 0 (see the module docstring)."""

    summary: int = 1
    nlq: int = 1
    handanalysis: int = 5
    no_data: int = 1


@dataclass(frozen=True, slots=True)
class SummaryRequest:
    """A player-summary request as the sandbox received it, recorded once routing chose the
    summary resource and before anything could refuse it: ``username`` from the ``Username``
    header or query parameter (``None`` when absent), ``network`` and ``player`` from the path
    (decoded), ``filter`` the ``filter`` query parameter exactly as received ("" when absent)."""

    username: str | None
    network: str
    player: str
    filter: str


class DroppedConnection(Exception):
    """Raised on purpose to make the server abort a response mid-body (the "drop" fault)."""


class _ServiceError(Exception):
    def __init__(self, code: int, detail: str | None = None) -> None:
        super().__init__(code)
        self.code = code
        self.detail = detail


def negotiate(accept: str | None) -> str | None:
    """``json`` or ``xml`` from an Accept header (first acceptable media type listed), or None."""
    if not accept:
        return None
    for part in accept.split(","):
        media, *params = (p.strip() for p in part.split(";"))
        if any(p.replace(" ", "") in ("q=0", "q=0.0", "q=0.00", "q=0.000") for p in params):
            continue
        media = media.lower()
        if media == "application/json":
            return "json"
        if media in ("application/xml", "text/xml"):
            return "xml"
    return None


class _DropResponse(Response):
    """Announces a body, sends part of it, then aborts the connection."""

    def __init__(self, fmt: str) -> None:
        super().__init__(b"", status_code=200, media_type=_MEDIA[fmt])

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        head = (
            b'{"Response":{"@success":"true",'
            if "json" in (self.media_type or "")
            else b'<?xml version="1.0"?><Response success="true">'
        )
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", (self.media_type or "").encode()), (b"content-length", b"4096")],
            }
        )
        await send({"type": "http.response.body", "body": head, "more_body": True})
        raise DroppedConnection("sandbox fault: connection dropped mid-response")


def _html_error(status: int) -> HTMLResponse:
    titles = {500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable"}
    title = titles.get(status, "Error")
    return HTMLResponse(
        f"<html><head><title>{status} {title}</title></head><body><h1>{status} {title}</h1></body></html>", status
    )


class SandboxApp:
    """The emulated service; :attr:`asgi` is the ASGI application."""

    def __init__(
        self,
        world: World,
        accounts: Accounts,
        *,
        faults: Faults | None = None,
        seed: int = 0,
        latency_ms: float = 0.0,
        costs: Costs | None = None,
        recent_tournaments: int = 30,
        summary_cache: int = 4096,
        summary_log: int = 100_000,
    ) -> None:
        self.world = world
        self.accounts = accounts
        self.faults = faults or Faults()
        self.plan = FaultPlan(self.faults, seed, latency_ms)
        self.costs = costs or Costs()
        self.recent_tournaments = recent_tournaments
        self.metadata = MetadataBook(world)
        self._summary_cache: OrderedDict[tuple[Any, ...], dict[str, Any]] = OrderedDict()
        self._summary_cache_size = summary_cache
        self.requests = 0
        #: every player-summary request handled after routing — answered or refused (bad Accept,
        #: a fault, credentials, 101024, a bad filter, quota...) — oldest first, at most
        #: ``summary_log`` of them: what tests read to see what a client really sent. Appends
        #: hold :attr:`_log_lock`; read a consistent copy with :meth:`summary_log_snapshot`.
        self.summary_requests: deque[SummaryRequest] = deque(maxlen=summary_log)
        self._log_lock = threading.Lock()
        self._networks: frozenset[str] | None = None
        #: (network, player) → a function rewriting that player's summary answer (body, format →
        #: body) after it is charged: how tests serve a hostile or broken answer for one player;
        #: ("countries", "") and ("news", "") rewrite those free answers.
        self.answer_rewrites: dict[tuple[str, str], Callable[[bytes, str], bytes]] = {}
        #: Coverage withdrawn after the fact, as tests set it: networks gone from
        #: the service (and from metadata), and (network, player) pairs who opted out.
        self.removed_networks: set[str] = set()
        self.opted_out: set[tuple[str, str]] = set()
        #: The error a player the world does not hold gets: 200039, as the service's public
        #: material gives it (tests set 103001, the sandbox's earlier choice, to try both).
        self.not_found_code = 200039
        self._trimmed: dict[tuple[str, frozenset[str]], DayMetadata] = {}
        base = "/api/{app}"
        self.asgi = Starlette(
            routes=[
                Route(base + "/metadata", self._endpoint("metadata"), methods=["GET"]),
                Route(base + "/metadata/countries", self._endpoint("countries"), methods=["GET"]),
                Route(base + "/news/whatsnew", self._endpoint("news"), methods=["GET"]),
                Route(base + "/filters/nlq", self._endpoint("nlq"), methods=["GET"]),
                Route(base + "/handanalysis", self._endpoint("handanalysis"), methods=["POST"]),
                Route(
                    base + "/networks/{network}/players/{player}/summary",
                    self._endpoint("summary"),
                    methods=["GET"],
                ),
            ]
        )

    @property
    def network_names(self) -> frozenset[str]:
        """``Network/@name`` of every network metadata lists (the path names the service knows)."""
        if self._networks is None:
            node = self.metadata.for_day().payload
            names = {n.attrs.get("name", "") for c in node.children if c.name == "Networks" for n in c.children}
            self._networks = frozenset(names)
        return self._networks

    def summary_log_snapshot(self) -> list[SummaryRequest]:
        """A copy of :attr:`summary_requests` (safe while requests are being served)."""
        with self._log_lock:
            return list(self.summary_requests)

    def clear_summary_log(self) -> None:
        """Forget the recorded summary requests (``summary_requests.clear()`` also works)."""
        with self._log_lock:
            self.summary_requests.clear()

    # ------------------------------------------------------------------------------- plumbing

    def _endpoint(self, resource: str):
        async def endpoint(request: Request) -> Response:
            return await self._handle(request, resource)

        return endpoint

    async def _handle(self, request: Request, resource: str) -> Response:
        self.requests += 1
        username = request.headers.get("username") or request.query_params.get("Username")
        if resource == "summary":
            record = SummaryRequest(
                username or None,
                request.path_params["network"],
                request.path_params["player"],
                request.query_params.get("filter") or "",
            )
            with self._log_lock:
                self.summary_requests.append(record)
        fmt = negotiate(request.headers.get("accept"))
        if fmt is None:
            return PlainTextResponse("Not Found: the Accept header must be application/json or application/xml", 404)
        draw = self.plan.draw()
        in_flight = self.accounts.enter(username) if username else 0
        try:
            if draw.delay_s > 0:
                await asyncio.sleep(draw.delay_s)
            if draw.kind == "5xx":
                return _html_error(draw.status)
            if resource == "summary" and self.plan.in_outage():
                return _html_error(503)
            if draw.kind == "drop":
                return _DropResponse(fmt)
            parallel = self.faults.parallel
            body = self._respond(
                request,
                resource,
                fmt,
                await request.body() if resource == "handanalysis" else b"",
                crowded=parallel is not None and in_flight > parallel,
                internal=draw.kind == "internal",
            )
            if draw.kind == "truncate":
                body = body[: len(body) // 2]
            elif draw.kind == "slow":
                await asyncio.sleep(self.faults.slow_seconds)
            return Response(body, 200, media_type=_MEDIA[fmt])
        finally:
            if in_flight:
                self.accounts.leave(username or "")

    def _respond(self, request: Request, resource: str, fmt: str, body: bytes, *, crowded: bool, internal: bool) -> bytes:
        languages = (request.headers.get("accept-language") or "en-us").split(",")[0].strip().lower() or "en-us"
        day = self._day_metadata()
        user: User | None = None
        try:
            if not (request.headers.get("user-agent") or "").strip():
                raise _ServiceError(101011)
            if internal:
                raise _ServiceError(0)
            appname = request.path_params["app"]
            if appname not in self.accounts.apps:
                raise _ServiceError(101012, f"unknown application {appname!r}")
            username = request.headers.get("username") or request.query_params.get("Username")
            password = request.headers.get("password") or request.query_params.get("Password")
            if resource == "metadata":
                return self._metadata(request, fmt, appname)
            if resource in ("countries", "news"):
                user, _ = self.accounts.authenticate(appname, username, password)
                if crowded and user is not None:
                    raise _ServiceError(101024)
                payload = catalog.countries_payload() if resource == "countries" else self._news(request)
                body = self._success(fmt, payload, user, languages)
                rewrite = self.answer_rewrites.get((resource, ""))
                return body if rewrite is None else rewrite(body, fmt)
            user, code = self.accounts.authenticate(appname, username, password)
            if user is None:
                raise _ServiceError(code)
            if crowded:
                raise _ServiceError(101024)
            if resource == "summary":
                return self._summary(request, fmt, user, languages)
            if not user.subscribed:
                raise _ServiceError(102004)
            if resource == "nlq":
                return self._nlq(request, fmt, user, languages)
            return self._hand(request, fmt, user, languages, body)
        except _ServiceError as exc:
            root = envelope(
                success=False,
                timestamp=self.accounts.now(),
                metadata_hash=day.hash,
                payload=error_element(exc.code, exc.detail),
                info=user_info(user, languages),
            )
            return render(fmt, root)

    def _success(self, fmt: str, payload: Element | bytes, user: User | None, languages: str) -> bytes:
        root = envelope(
            success=True,
            timestamp=self.accounts.now(),
            metadata_hash=self._day_metadata().hash,
            payload=payload if isinstance(payload, Element) else None,
            info=user_info(user, languages),
        )
        return render(fmt, root, None if isinstance(payload, Element) else payload)

    def _charge_or_fail(self, user: User, cost: int) -> None:
        code = self.accounts.quota_error(user, cost)
        if code:
            raise _ServiceError(code)

    # ------------------------------------------------------------------------------- resources

    def _day_metadata(self) -> DayMetadata:
        """The serving day's metadata, without the networks gone from the service (a new hash)."""
        day = self.metadata.for_day()
        removed = frozenset(self.removed_networks)
        if not removed:
            return day
        key = (day.hash, removed)
        if key not in self._trimmed:
            groups = [
                Element(g.name, g.attrs, g.text, [n for n in g.children if n.attrs.get("name") not in removed])
                if g.name == "Networks"
                else g
                for g in day.payload.children
            ]
            payload = Element(day.payload.name, day.payload.attrs, day.payload.text, groups)
            full_json = to_json(payload)
            xml = to_xml(payload)
            digest = hashlib.md5(full_json, usedforsecurity=False).hexdigest()
            self._trimmed[key] = DayMetadata(day.day, payload, digest, full_json[1:-1], xml[xml.index(b"?>") + 2 :].lstrip())
        return self._trimmed[key]

    def _metadata(self, request: Request, fmt: str, appname: str) -> bytes:
        day = self._day_metadata()
        timestamp = self.accounts.now()
        if request.query_params.get("hash") == day.hash:
            root = envelope(
                success=True,
                timestamp=timestamp,
                metadata_hash=day.hash,
                payload=Element("MetadataResponse", {"cached": "true"}),
            )
            return render(fmt, root)
        root = envelope(
            success=True,
            timestamp=timestamp,
            metadata_hash=day.hash,
            app_version=self.accounts.apps[appname].version,
        )
        return render(fmt, root, day.json_fragment if fmt == "json" else day.xml_fragment)

    def _news(self, request: Request) -> Element:
        raw = request.query_params.get("limit")
        limit: int | None = None
        if raw is not None and raw != "":
            try:
                limit = int(raw)
            except ValueError:
                raise _ServiceError(101012, f"limit {raw!r} is not an integer") from None
            if limit < 0:
                raise _ServiceError(101012, "limit must not be negative")
        return catalog.news_payload(self.world.today, limit, self.world.seed)

    def _nlq(self, request: Request, fmt: str, user: User, languages: str) -> bytes:
        question = (request.query_params.get("question") or "").strip()
        if not question:
            raise _ServiceError(101012, "no question")
        converted = nlq.convert(question, request.query_params.get("locale"), request.query_params.get("timezone"))
        if converted is None:
            raise _ServiceError(101012, "the question could not be understood")
        self._charge_or_fail(user, self.costs.nlq)
        self.accounts.charge(user, self.costs.nlq)
        payload = Element("FilterResponse")
        payload.add("Question", text=question)
        payload.add("Filter", text=converted)
        return self._success(fmt, payload, user, languages)

    def _hand(self, request: Request, fmt: str, user: User, languages: str, body: bytes) -> bytes:
        lang = request.query_params.get("langCode") or "en"
        text = body.decode("utf-8", errors="replace")
        self._charge_or_fail(user, self.costs.handanalysis)
        try:
            analysis = handanalysis.analyse(text, lang)
        except handanalysis.HandParseError as exc:
            raise _ServiceError(101012, f"hand history not understood ({exc})") from None
        self.accounts.charge(user, self.costs.handanalysis)
        payload = Element("HandAnalysisResponse", {"langCode": "en"})
        payload.add("Analysis", text=analysis)
        return self._success(fmt, payload, user, languages)

    def _summary(self, request: Request, fmt: str, user: User, languages: str) -> bytes:
        network = request.path_params["network"]
        name = request.path_params["player"]
        filter_text = request.query_params.get("filter") or ""
        if network not in self.network_names:
            raise _ServiceError(101012, f"unknown network {network!r}")
        if network in self.removed_networks:  # a lookup all the same (see the module docstring)
            self._charge_or_fail(user, self.costs.no_data)
            self.accounts.charge(user, self.costs.no_data)
            raise _ServiceError(101012, f"network {network!r} is not covered")
        world = self.world
        today = world.today
        try:
            predicate = compile_filter(filter_text, world, world.day_end(today))
        except FilterNotSupported as exc:
            raise _ServiceError(101012, f"invalid filter ({exc})") from None
        player = world.player(network, name)
        if player is None:
            cost = self.costs.no_data
            self._charge_or_fail(user, cost)
            self.accounts.charge(user, cost)
            raise _ServiceError(self.not_found_code, f"{name!r} on {network}")
        opted_out = (network, name) in self.opted_out
        cost = self.costs.no_data if opted_out else self.costs.summary
        self._charge_or_fail(user, cost)
        key = (player.index, filter_text, today.toordinal(), self.recent_tournaments)
        frag = self._summary_cache.get(key)
        if frag is None:
            history = world.history(player, today)
            payload = summary_payload(
                network,
                name,
                player.country,
                filter_text,
                predicate.apply(history),
                history[-1].tournament.date if history else None,
                world.rate_on,
                self.recent_tournaments,
            )
            frag = self._summary_cache[key] = {"element": payload}
            if len(self._summary_cache) > self._summary_cache_size:
                self._summary_cache.popitem(last=False)
        if opted_out:
            frag = {"element": _withheld(frag["element"])}
        if fmt not in frag:
            frag[fmt] = fragment(frag["element"], fmt)
        self.accounts.charge(user, cost)
        body = self._success(fmt, frag[fmt], user, languages)
        rewrite = self.answer_rewrites.get((network, name))
        return body if rewrite is None else rewrite(body, fmt)


def _withheld(payload: Element) -> Element:
    """A summary payload as served for a player who opted out: every statistic marked
    ``authorized="false"`` without a value, no data sets, timeline or recent tournaments."""

    def withhold(node: Element) -> Element:
        if node.name == "Statistics":
            kept = [
                Element("Statistic", {"id": c.attrs.get("id", ""), "authorized": "false"})
                for c in node.children
                if c.name == "Statistic"
            ]
            return Element(node.name, node.attrs, node.text, kept)
        return Element(node.name, node.attrs, node.text, [withhold(c) for c in node.children if c.name != "RecentTournaments"])

    return withhold(payload)
