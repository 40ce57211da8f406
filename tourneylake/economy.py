"""The search economy: what the budget looks like, and the service's other metered resources.

Everything here keeps design §5's promises outside the nightly harvest too:

- :func:`budget_report` reads the searches left through a free authenticated call and plans
  tonight exactly as the harvest would, without spending anything (a question filter not yet
  converted is shown as needing its conversion, never converted);
- :func:`check_filter` checks a filter for free (syntax, then metadata from the lake or the
  sandbox);
- :func:`ask` converts a question once (the natural-language cache is shared with the harvest);
- :func:`analyze_hand` and :func:`analyze_inbox` analyse each hand once and keep the analysis
  under ``$TOURNEYLAKE_DATA_DIR/hands/``: a hand already analysed is never sent again.

Every metered call goes through the night's metering hooks, so it is guarded by a
:class:`~tourneylake.budget.Budget` (run cap, reserve) and written to the search ledger of the
day it is made on.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import orjson
from rich.console import Console
from rich.table import Table

from tourneylake.api import ApiError, Client, CredentialsError, QuotaError, SubscriptionError
from tourneylake.budget import HAND_ANALYSIS, NLQ, PLAYER_SUMMARY, Budget, Plan, Target, plan_night
from tourneylake.config import Settings
from tourneylake.filters import FilterCatalog, FilterSyntaxError, parse_filter
from tourneylake.lake import SOURCE_FILE
from tourneylake.ledger import Ledger, ledger_dates, night_entries, night_table
from tourneylake.night import (
    BudgetRefused,
    Night,
    RunFailed,
    _left_in_run,
    _metering_hooks,
    _nlq_key,
    _spent_tonight,
    ask_filter,
    last_fetched,
    paid_summaries,
    resolve_targets,
    target_key,
)
from tourneylake.tree import Node
from tourneylake.watchlist import Watchlist, WatchlistError, load_watchlist

__all__ = [
    "BudgetReport",
    "HandAnalysisRefused",
    "InboxOutcome",
    "InvalidConvertedFilter",
    "analyze_hand",
    "analyze_inbox",
    "ask",
    "budget_report",
    "check_filter",
    "hand_record_path",
    "hands_dir",
    "inbox_dir",
]

log = logging.getLogger(__name__)

HANDS_DIR = "hands"
INBOX_DIR = Path("inbox") / "hands"


class HandAnalysisRefused(ApiError):
    """The account may not analyse hands (error 102004/102005: subscribers only)."""


class InvalidConvertedFilter(ValueError):
    """The service converted a question into a filter that metadata rejects."""


def _today() -> date:
    return datetime.now(UTC).date()


@contextmanager
def _service(settings: Settings, today: date | None = None) -> Iterator[str]:
    """The base URL to talk to: the live service, or a sandbox started for this call only."""
    from tourneylake.service import connect

    with connect(settings, today=today) as endpoint:
        yield endpoint.base_url


def _read_remaining_free(night: Night) -> int | None:
    """Searches left, through the free authenticated Countries call (never a search)."""
    try:
        with night.client() as client:
            response = client.countries()
    except CredentialsError as exc:
        raise RunFailed(f"credentials refused by the service: {exc}") from None
    info = response.envelope.user_info
    if info is not None and not info.logged_in:  # free calls answer bad credentials with loggedIn="false"
        raise RunFailed("credentials refused by the service: it answered loggedIn=false (check user name, password and app key)")
    return response.remaining_searches


def _adhoc_budget(night: Night, *, spent_before: int = 0) -> Budget:
    """The guard for an ad-hoc run: the same cap and reserve as a night, from a free reading."""
    settings = night.settings
    return Budget(
        remaining=_read_remaining_free(night),
        max_searches_per_run=_left_in_run(settings.max_searches_per_run, spent_before),
        reserve=settings.reserve_searches,
        costs=night.costs,
    )


def _publish_ledger(night: Night) -> None:
    """Rewrite the night's ``search_ledger`` table from every ledger line of that night (when
    there is any), so the warehouse sees ad-hoc metered calls too."""
    if next(night_entries(night.lake.root, night.snapshot_date), None) is None:
        return
    night.lake.write_table("search_ledger", night.snapshot_date, night_table(night.lake.root, night.snapshot_date))


def _problem_lines(catalog: FilterCatalog, expression: str) -> list[str]:
    return [str(problem) for problem in catalog.problems(expression)]


# ------------------------------------------------------------------------------------ budget


@dataclass
class BudgetReport:
    """What ``tourneylake budget`` shows; built by :func:`budget_report` without a search."""

    night: date
    source: str
    remaining: int | None
    remaining_note: str | None
    max_searches_per_run: int | None
    reserve: int
    spent_tonight: int
    cap_left: int | None
    affordable: int | None
    costs: dict[str, int]
    planned: list[Target] = field(default_factory=list)
    conversions: list[str] = field(default_factory=list)
    searches_planned: int = 0
    deferred: list[tuple[Target, str]] = field(default_factory=list)
    skipped: list[tuple[Target, str]] = field(default_factory=list)
    unconverted: list[str] = field(default_factory=list)
    spend_per_night: dict[date, int] = field(default_factory=dict)
    calls_per_night: dict[date, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def conversion_note(self, target: Target) -> str:
        if target.filter_name is not None and target.filter_name in self.unconverted:
            return f"needs conversion ({self.costs.get(NLQ, 1)} search{'es' if self.costs.get(NLQ, 1) != 1 else ''})"
        return ""

    def print(self, console: Console) -> None:
        console.print(f"[bold]Budget for the night of {self.night.isoformat()}[/] ({self.source})", highlight=False)
        if self.remaining is None:
            console.print(f"Searches left now: [yellow]unknown[/] ({self.remaining_note or 'not reported'})", highlight=False)
        else:
            console.print(f"Searches left now: [bold]{self.remaining}[/]", highlight=False)
        cap = "none" if self.max_searches_per_run is None else str(self.max_searches_per_run)
        console.print(
            f"Run cap: {cap}; spent tonight: {self.spent_tonight}; reserve: {self.reserve}; "
            f"affordable tonight: {'unlimited' if self.affordable is None else self.affordable}",
            highlight=False,
        )
        console.print(
            "Costs: " + ", ".join(f"{name} {cost}" for name, cost in sorted(self.costs.items())),
            highlight=False,
        )
        for note in self.notes:
            console.print(f"[yellow]note:[/] {note}", highlight=False)

        plan = Table(title=f"Tonight's plan: {len(self.planned)} calls, {self.searches_planned} searches")
        for column in ("#", "network", "player", "filter", "note"):
            plan.add_column(column)
        for number, target in enumerate(self.planned, 1):
            plan.add_row(str(number), target.network, target.player, target.filter_name or "(unfiltered)", self.conversion_note(target))
        console.print(plan)

        for title, items in (("Deferred to a later night", self.deferred), ("Skipped (free, known to fail or done)", self.skipped)):
            table = Table(title=f"{title}: {len(items)}")
            for column in ("network", "player", "filter", "why"):
                table.add_column(column)
            for target, why in items:
                extra = self.conversion_note(target)
                table.add_row(target.network, target.player, target.filter_name or "(unfiltered)", why + (f"; {extra}" if extra else ""))
            console.print(table)

        spend = Table(title="Spend per night (search ledger)")
        spend.add_column("night")
        spend.add_column("searches", justify="right")
        spend.add_column("metered calls", justify="right")
        for when in sorted(self.spend_per_night):
            spend.add_row(when.isoformat(), str(self.spend_per_night[when]), str(self.calls_per_night.get(when, 0)))
        if not self.spend_per_night:
            spend.add_row("(none yet)", "0", "0")
        console.print(spend)


def spend_per_night(lake_root: Path) -> tuple[dict[date, int], dict[date, int]]:
    """(searches, metered calls) per snapshot date, summed from every ledger line."""
    spend: dict[date, int] = {}
    count: dict[date, int] = {}
    for when in ledger_dates(lake_root):
        rows = list(night_entries(lake_root, when))
        spend[when] = sum(int(row.get("cost") or 0) for row in rows)
        count[when] = len(rows)
    return spend, count


def _harvested_tonight(night: Night) -> set[tuple[str, str, str]]:
    """What tonight already paid for: successful ledger lines, and raw summaries in the lake."""
    done: set[tuple[str, str, str]] = set()
    for row in night_entries(night.lake.root, night.snapshot_date):
        if row.get("resource") == PLAYER_SUMMARY and row.get("outcome") == "ok":
            done.add(target_key(row.get("network") or "", row.get("player") or "", row.get("filter_name")))
    for target, _, _ in paid_summaries(night):
        done.add(target_key(target.network, target.player, target.filter_name))
    return done


def budget_report(settings: Settings, night: date) -> BudgetReport:
    """Searches left, tonight's plan, the deferred and the skipped with why, and the spend per
    night. Costs nothing: the only call is the free Countries resource."""
    with _service(settings, today=night) as base_url, _reading_night(settings, base_url, night) as the_night:
        notes: list[str] = []
        remaining_note: str | None = None
        try:
            remaining = _read_remaining_free(the_night)
            if remaining is None:
                remaining_note = "the service did not report RemainingSearches"
        except ApiError as exc:
            remaining, remaining_note = None, f"could not ask the service: {exc}"
        return _report(settings, night, the_night, remaining, remaining_note, notes)


def _report(settings: Settings, night: date, the_night: Night, remaining: int | None, remaining_note: str | None, notes: list[str]) -> BudgetReport:
    spent = _spent_tonight(the_night)
    cap_left = _left_in_run(settings.max_searches_per_run, spent)
    costs = the_night.costs.snapshot()
    report = BudgetReport(
        night=night,
        source=settings.source,
        remaining=remaining,
        remaining_note=remaining_note,
        max_searches_per_run=settings.max_searches_per_run,
        reserve=settings.reserve_searches,
        spent_tonight=spent,
        cap_left=cap_left,
        affordable=None,
        costs=costs,
        notes=notes,
    )
    report.spend_per_night, report.calls_per_night = spend_per_night(the_night.lake.root)

    watchlist: Watchlist | None = None
    if not settings.watchlist.is_file():
        notes.append(f"no watchlist at {settings.watchlist}: nothing to plan")
    else:
        try:
            watchlist = load_watchlist(settings.watchlist)
        except WatchlistError as exc:
            notes.append("watchlist not usable: " + " | ".join(str(exc).splitlines()))
    if the_night.filter_catalog() is None:
        notes.append("no metadata in the lake yet: filters checked for syntax only")
    known_networks = the_night.known_networks()
    if known_networks is None:
        notes.append("no metadata in the lake yet: networks not checked")

    if watchlist is not None:
        targets, problems, unconverted = resolve_targets(the_night, watchlist, None, None, convert=False)
        plan: Plan = plan_night(
            targets,
            last_fetched=last_fetched(the_night),
            harvested_tonight=_harvested_tonight(the_night),
            remaining=remaining,
            max_searches_per_run=cap_left,
            reserve=settings.reserve_searches,
            costs=the_night.costs,
            known_networks=known_networks,
            filter_problems=problems,
            run_date=night,
        )
        report.planned = list(plan.calls)
        report.conversions = list(plan.conversions)
        report.searches_planned = plan.searches_planned
        report.deferred = list(plan.deferred)
        report.skipped = list(plan.skipped)
        report.unconverted = unconverted
        report.affordable = plan.affordable
    else:
        known = [b for b in (cap_left, None if remaining is None else max(remaining - settings.reserve_searches, 0)) if b is not None]
        report.affordable = min(known) if known else None
    return report


# ------------------------------------------------------------------------------------ filters


def check_filter(settings: Settings, expression: str) -> list[str]:
    """Every problem with ``expression``; empty when it is fine. Never spends a search.

    Syntax is always checked. Then metadata: the lake's (when it holds metadata tables), else
    the sandbox's (``settings.is_sandbox``; the Metadata resource is free), else none (a warning
    says only the syntax was checked)."""
    try:
        parse_filter(expression)
    except FilterSyntaxError as exc:
        return [f"syntax: {exc}"]
    catalog = _lake_catalog(settings)
    if catalog is None and settings.is_sandbox:
        with _service(settings) as base_url:
            catalog = _service_catalog(settings, base_url)
    if catalog is None:
        log.warning("no metadata in %s yet: only the filter's syntax was checked (run `tourneylake run` first)", settings.data_dir)
        return []
    return _problem_lines(catalog, expression)


def _lake_exists(settings: Settings) -> bool:
    """Whether the data directory already holds a lake (constructing a :class:`Lake` claims the
    directory for the settings' source, which a read-only command must not do)."""
    return (Path(settings.data_dir) / "lake" / SOURCE_FILE).is_file()


@contextmanager
def _reading_night(settings: Settings, base_url: str, when: date) -> Iterator[Night]:
    """A night to read the lake through, without claiming an empty data directory: with no
    lake yet, an empty scratch one stands in (nothing to read there either)."""
    if _lake_exists(settings):
        yield Night(settings, base_url, when)
        return
    with tempfile.TemporaryDirectory(prefix="tourneylake-empty-") as scratch:
        yield Night(replace(settings, data_dir=Path(scratch)), base_url, when)


def _lake_catalog(settings: Settings) -> FilterCatalog | None:
    if not _lake_exists(settings):
        return None
    try:
        return Night(settings, settings.base_url, _today()).filter_catalog()
    except Exception as exc:  # noqa: BLE001 - a lake of another source, or none: fall back
        log.debug("no filter catalog from the lake: %s", exc)
        return None


def ask(settings: Settings, question: str, timezone: str | None = None, locale: str | None = None) -> tuple[str, int]:
    """Convert ``question`` into a filter: one search the first time, free after (cached with
    its timezone and locale, shared with the nightly harvest). Returns (filter, searches spent).

    The returned filter is validated (syntax, and metadata when the lake has it); a filter the
    service produced but metadata rejects raises :class:`InvalidConvertedFilter`."""
    today = _today()
    night = Night(settings, settings.base_url, today)
    cached = night.state.read("nlq_cache").get(_nlq_key(question, timezone, locale))
    spent = 0
    catalog = night.filter_catalog()
    if cached is not None:
        expression = cached
    else:
        with _service(settings) as base_url:
            night.base_url = base_url
            with Ledger(night.lake.root, today, night.run_id) as ledger:
                try:
                    budget = _adhoc_budget(night)
                    expression = ask_filter(night, question, timezone, locale, budget, ledger)
                finally:
                    ledger.close()
                    spent = ledger.spent
                    _publish_ledger(night)
            if catalog is None:
                catalog = _service_catalog(settings, base_url)
    problems = _converted_problems(catalog, expression)
    if problems:
        raise InvalidConvertedFilter(
            f"the service converted the question to {expression!r}, which is not a valid filter: "
            + "; ".join(problems)
            + f" ({spent} search{'es' if spent != 1 else ''} spent)"
        )
    return expression, spent


def _converted_problems(catalog: FilterCatalog | None, expression: str) -> list[str]:
    try:
        parse_filter(expression)
    except FilterSyntaxError as exc:
        return [str(exc)]
    return _problem_lines(catalog, expression) if catalog is not None else []


def _service_catalog(settings: Settings, base_url: str) -> FilterCatalog | None:
    """The filter catalog from the service's Metadata resource (free, no credentials sent)."""
    try:
        with Client(settings, base_url=base_url) as client:
            return FilterCatalog.from_metadata(client.metadata().root)
    except (ApiError, ValueError) as exc:
        log.warning("could not read metadata to validate the filter: %s", exc)
        return None


# -------------------------------------------------------------------------------------- hands


def hands_dir(settings: Settings) -> Path:
    return Path(settings.data_dir) / HANDS_DIR


def inbox_dir(settings: Settings) -> Path:
    return Path(settings.data_dir) / INBOX_DIR


_LANG_RE = re.compile(r"[^A-Za-z0-9_-]")


def hand_record_path(settings: Settings, sha256: str, lang: str | None) -> Path:
    """Where a hand's analysis is kept: ``hands/<sha256>.json`` for the default language,
    ``hands/<sha256>.<lang>.json`` for another one (a hand is analysed once per language)."""
    suffix = f".{_LANG_RE.sub('_', lang)}" if lang else ""
    return hands_dir(settings) / f"{sha256}{suffix}.json"


def _stored_analysis(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        record = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError:
        return None  # a record cut short: analyse again rather than trust it
    return record if isinstance(record, dict) and isinstance(record.get("analysis"), str) else None


def _store_analysis(path: Path, record: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex}")
    tmp.write_bytes(orjson.dumps(record, option=orjson.OPT_INDENT_2))
    os.replace(tmp, path)


def _analysis_text(payload: Node | None) -> str:
    """The assessment's text, whatever element holds it (the body's shape is undocumented)."""
    if payload is None:
        return ""
    if payload.text:
        return payload.text
    for name in ("Analysis", "Text", "Assessment", "Result"):
        text = payload.child_text(name)
        if text:
            return text
    parts = [_analysis_text(child) for child in payload.children()]
    return "\n".join(part for part in parts if part)


def _analyse_one(night: Night, client: Any, ledger: Ledger, hand: bytes, lang: str | None, path: Path) -> tuple[str, int]:
    """Send one hand (the caller checked it is not stored), store its analysis, return
    (analysis, searches spent). A subscriber-only refusal raises :class:`HandAnalysisRefused`."""
    before = ledger.spent
    try:
        response = client.hand_analysis(hand, lang or None)
    except SubscriptionError as exc:
        raise HandAnalysisRefused(f"hand analysis is for subscribers only: {exc}", resource=HAND_ANALYSIS) from None
    searches = ledger.spent - before
    analysis = _analysis_text(response.payload)
    _store_analysis(
        path,
        {
            "hand_sha256": hashlib.sha256(hand).hexdigest(),
            "hand": hand.decode("utf-8", errors="replace"),
            "lang": lang or None,
            "analysis": analysis,
            "analysed_at": datetime.now(UTC).isoformat(),
            "searches": searches,
            "run_id": night.run_id,
        },
    )
    return analysis, searches


def analyze_hand(settings: Settings, hand_bytes: bytes, lang: str | None = None) -> tuple[str, int]:
    """Analyse one hand history (5 searches) once: an analysed hand (same bytes, same language)
    is answered from ``hands/`` for free. Returns (analysis, searches spent)."""
    digest = hashlib.sha256(hand_bytes).hexdigest()
    path = hand_record_path(settings, digest, lang)
    stored = _stored_analysis(path)
    if stored is not None:
        return stored["analysis"], 0
    today = _today()
    with _service(settings) as base_url:
        night = Night(settings, base_url, today)
        ledger = Ledger(night.lake.root, today, night.run_id)
        try:
            budget = _adhoc_budget(night)
            with night.client(**_metering_hooks(night, budget, ledger)) as client:
                return _analyse_one(night, client, ledger, hand_bytes, lang, path)
        finally:
            ledger.close()
            _publish_ledger(night)


@dataclass
class InboxOutcome:
    """What :func:`analyze_inbox` did with the files in ``inbox/hands/``."""

    analysed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    deferred: list[tuple[str, str]] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    searches_spent: int = 0
    remaining_searches: int | None = None
    stopped_reason: str | None = None


def _inbox_files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if p.is_file() and not p.name.startswith("."))


def analyze_inbox(night: Night, lang: str | None = None) -> InboxOutcome:
    """Analyse every hand file in ``$TOURNEYLAKE_DATA_DIR/inbox/hands/`` not analysed before,
    within the run's budget (cap and reserve; a rerun of the night spends only what the cap has
    left after tonight's earlier hand analyses). A quota or subscription error stops the rest,
    which stays in the inbox for a later run. The files are left where they are: an analysed hand
    is skipped at no cost."""
    settings = night.settings
    outcome = InboxOutcome()
    todo: list[tuple[Path, bytes, Path]] = []
    for file in _inbox_files(inbox_dir(settings)):
        content = file.read_bytes()
        record = hand_record_path(settings, hashlib.sha256(content).hexdigest(), lang)
        if _stored_analysis(record) is not None:
            outcome.skipped.append(file.name)
        else:
            todo.append((file, content, record))
    if not todo:
        return outcome

    spent_before = sum(
        int(row.get("cost") or 0)
        for row in night_entries(night.lake.root, night.snapshot_date)
        if row.get("resource") == HAND_ANALYSIS
    )
    ledger = Ledger(night.lake.root, night.snapshot_date, night.run_id)
    try:
        budget = _adhoc_budget(night, spent_before=spent_before)
        with night.client(**_metering_hooks(night, budget, ledger)) as client:
            for index, (file, content, record) in enumerate(todo):
                if outcome.stopped_reason is not None:
                    outcome.deferred.extend((f.name, outcome.stopped_reason) for f, _, _ in todo[index:])
                    break
                refusal = budget.refusal(HAND_ANALYSIS)
                if refusal is not None:
                    outcome.deferred.extend((f.name, refusal) for f, _, _ in todo[index:])
                    break
                try:
                    _analyse_one(night, client, ledger, content, lang, record)
                except BudgetRefused as exc:
                    outcome.deferred.extend((f.name, str(exc)) for f, _, _ in todo[index:])
                    break
                except HandAnalysisRefused as exc:
                    outcome.stopped_reason = str(exc)
                    budget.stop(str(exc))
                    outcome.deferred.append((file.name, str(exc)))
                except QuotaError as exc:
                    outcome.stopped_reason = f"quota: {exc}"
                    budget.stop(outcome.stopped_reason)
                    outcome.deferred.append((file.name, outcome.stopped_reason))
                except CredentialsError as exc:
                    raise RunFailed(f"credentials refused by the service: {exc}") from None
                except ApiError as exc:
                    outcome.failed.append((file.name, str(exc)))
                else:
                    outcome.analysed.append(file.name)
        outcome.remaining_searches = budget.remaining
    finally:
        ledger.close()
        outcome.searches_spent = ledger.spent
        _publish_ledger(night)
    return outcome
