"""The money side of a night's calls, carved out of the session.

A :class:`Meter` gates every metered attempt with the budget and announces it to the ledger
before it is sent, then writes its row (:meth:`Meter.hooks`); books what the service counted
beyond the ledger's rows, for this run (:meth:`Meter.reconcile_run`) and for runs that died in
flight (:meth:`Meter.reconcile_dead_runs`); and keeps the cost model's votes between runs. It
reads the account's searches left through the session's free call, which it is given.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

from tourneylake.api import Attempt, calls
from tourneylake.api.errors import NOT_FOUND_CODES
from tourneylake.config import Settings
from tourneylake.errors import BudgetRefused, LakeError
from tourneylake.lake.lake import Lake
from tourneylake.lake.ledger import (
    EXTERNAL_SPENDING,
    NOT_CHARGED,
    RECONCILED,
    RECONCILED_AFTER_CRASH,
    UNCERTAIN,
    Ledger,
    LedgerWriter,
    RunLog,
    login_digest,
    unexplained_charges,
)
from tourneylake.lake.locks import HARVEST_LOCK
from tourneylake.lake.raw import key_digest
from tourneylake.lake.state import StateStore
from tourneylake.night.budget import NO_DATA, Budget, CostModel, Reservation, no_data
from tourneylake.night.quota_day import quota_day_of

__all__ = ["COST_VOTES", "Meter", "harvest_lock_name", "left_in_run"]

log = logging.getLogger(__name__)

#: The cost model's votes of earlier runs, per resource (see ``budget.CostModel``).
COST_VOTES = "cost_votes"


def harvest_lock_name(account: str | None) -> str:
    """The lake lock a harvest of ``account`` (``None``: the settings' one account) holds."""
    return HARVEST_LOCK if account is None else f"{HARVEST_LOCK}-{account}"


def left_in_run(cap: int | None, spent: int) -> int | None:
    """What the run cap leaves once ``spent`` is spent (``None``: no cap)."""
    return None if cap is None else max(0, cap - spent)


def _cost_votes(lake: Lake) -> dict[str, list[int]]:
    """Earlier runs' cost votes; none when the document is missing or damaged (a cache). Each
    vote is checked by the cost model (:meth:`~tourneylake.night.budget.CostModel._plausible`)."""
    try:
        document = StateStore(lake).read(COST_VOTES)
    except (LakeError, OSError) as exc:
        log.warning("the cost model's earlier votes are not read (%s): it starts from the documented costs", exc)
        return {}
    return {r: votes for r, votes in document.items() if type(votes) is list}


def _maybe_charged(code: int | None) -> bool:
    """Whether a refusal may still have cost a search: one after the lookup was made, which a
    service charging lookups without data may charge — "request not valid" (what a network it
    no longer covers gets) and the codes beyond the documented credential, quota and internal
    ones (1010xx, 1020xx, 0), which are refused before any work."""
    return code is not None and (code == 101012 or not (code == 0 or 101000 <= code < 103000))


def _booked_as(attempt: Attempt) -> str | None:
    """What an attempt is booked at in the cost model (``None``: nothing). An answer, or a body
    the service produced but that arrived cut short or unreadable (it did the work), costs its
    resource; "not found" is a lookup that returned no data (:func:`~tourneylake.night.budget.no_data`,
    charged or not as the service's count has shown). Other refusals and transport failures are
    free; a charge nobody saw is found by the reconciliations, as is one the service let off."""
    if attempt.outcome in ("ok", "malformed_response", "unusable_response"):
        return attempt.call.resource
    if attempt.error_code in NOT_FOUND_CODES:
        return no_data(attempt.call.resource)
    return None


@dataclass
class _NoData:
    """One run's answers without data, which the service may or may not have charged: the
    searches booked on lookups that returned none (per cost-model kind: rows and searches), and
    the most that the answers booked at 0 could have cost (see :meth:`Meter.reconcile_run`)."""

    rows: Counter[str] = field(default_factory=Counter)
    booked: int = 0
    unbooked_rows: Counter[str] = field(default_factory=Counter)
    maybe: int = 0


@dataclass
class Meter:
    """The metering of one session's calls (see the module docstring). Build with :meth:`open`."""

    settings: Settings
    lake: Lake
    night: date
    run_id: str
    #: The watchlist account whose settings these are (``None``: the settings' one account). Its
    #: ledger rows carry the name, and its spending and reconciliations count its own runs only.
    account: str | None
    #: The session's free reading of the searches left (never a search).
    read_remaining: Callable[[], int | None]
    writable: bool = True
    costs: CostModel = field(default_factory=CostModel)
    #: The service's clock (its quota day is counted on it); ours when not given.
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    #: Whether this run's cost votes may be kept (not when a harvest spent beside it, see `metered`).
    _trusted_votes: bool = field(default=True, repr=False)
    #: Each open ledger's answers without data (by the ledger's id), for its reconciliation.
    _no_data: dict[int, _NoData] = field(default_factory=dict, repr=False)
    #: Each open ledger's quota day when it began (by the ledger's id).
    _began: dict[int, date] = field(default_factory=dict, repr=False)
    #: The open ledgers (by id) with a charged answer that told no searches left (unreadable):
    #: the fewest any answer told may not show its charge, so the reconciliation reads anew.
    _unread: set[int] = field(default_factory=set, repr=False)

    @classmethod
    def open(
        cls,
        settings: Settings,
        lake: Lake,
        night: date,
        run_id: str,
        account: str | None,
        read_remaining: Callable[[], int | None],
        *,
        writable: bool,
        clock: Callable[[], datetime] | None = None,
    ) -> Meter:
        """A meter starting from the lake's earlier cost votes."""
        costs = CostModel(votes=_cost_votes(lake))
        meter = cls(settings, lake, night, run_id, account, read_remaining, writable, costs)
        if clock is not None:
            meter.clock = clock
        return meter

    def quota_day(self) -> date:
        """The quota day the account spends from now (the service's clock)."""
        return quota_day_of(self.clock(), self.settings.quota_reset_s)

    def save_cost_votes(self) -> None:
        """Add this session's new cost votes to the lake's (the last ``window`` per resource), so
        the next run starts from them. A cache: a failure to write it is logged, not raised."""
        new = self.costs.take_new_votes()
        if not new or not self.writable or not self._trusted_votes:
            return
        window = self.costs.window

        def add(document: dict[str, Any]) -> None:
            for resource, votes in new.items():
                kept = document.get(resource)  # what is not a vote is dropped when read (`_cost_votes`)
                document[resource] = [*(kept if type(kept) is list else []), *votes][-window:]

        try:
            StateStore(self.lake).update(COST_VOTES, add, reset_damaged=True)
        except OSError as exc:
            log.warning("the cost model's votes could not be kept (%s): the next run starts without them", exc)

    def ledger(self, remaining_before: int | None) -> LedgerWriter:
        writer = LedgerWriter(
            self.lake, self.night, self.run_id, remaining_before=remaining_before, account=self.account, login=self.login
        )
        self._began[id(writer)] = self.quota_day()
        return writer

    @property
    def login(self) -> str | None:
        """The digest of the username these calls spend from (see ``ledger.login_digest``)."""
        return login_digest(self.settings.username)

    @contextmanager
    def _no_harvest_running(self) -> Iterator[frozenset[str] | None]:
        """When no harvest of this lake runs, the names of all its ``harvest*`` locks, taken and
        held for the block; else ``None`` (also on an object store, which has no lock). Any
        harvest may spend from these credentials' count (two account names can share a
        username), so a reconciliation beside it would book its unrecorded charges. The names
        are listed again once taken: a harvest of a new account may have made its lock since."""
        with self.lake.locks.every(HARVEST_LOCK, also=[self.harvest_lock], wait=False) as taken:
            yield taken

    @contextmanager
    def metered(self, resource: str) -> Iterator[tuple[Budget, LedgerWriter]]:
        """Metered calls of ``resource`` outside the harvest (a question, a hand): a budget with
        what the night's cap for them leaves (:meth:`spent_on_cap`) and the reserve, from a free
        reading, and the ledger. Before it, these credentials' dead runs are reconciled when no
        harvest runs. When the block ends the run is reconciled with the service's count (also
        when it ends by an error: a call charged whose answer never came is booked now), its
        cost votes are kept (unless a harvest ran beside it), and the night's ledger partition is
        published."""
        with self._no_harvest_running() as holding:
            remaining = self.read_remaining()
            # An earlier run of these credentials that died mid-call, reconciled here only when no
            # harvest is spending now (its unrecorded charges would be booked to the dead run)
            # and on a local lake (an object store has no lock: its harvests reconcile).
            if holding is not None:
                self.reconcile_dead_runs(remaining, holding=holding)
        self._trusted_votes = holding is not None  # beside a harvest, a reading includes its charges
        budget = Budget(
            remaining=remaining,
            max_searches_per_run=left_in_run(self.settings.max_searches_per_run, self.spent_on_cap(resource)),
            reserve=self.settings.reserve_searches,
            costs=self.costs,
        )
        try:
            with self.ledger(budget.remaining) as ledger:
                try:
                    yield budget, ledger
                except Exception:
                    try:
                        self.reconcile_run(ledger)
                    except Exception as exc:  # noqa: BLE001 - the block's own error is the one to raise
                        log.warning(
                            "run %s could not be reconciled after its failure (%s): the next run does it", self.run_id, exc
                        )
                    raise
                self.reconcile_run(ledger)
        finally:
            if self._trusted_votes:  # a harvest that started during the calls spent beside them
                with self._no_harvest_running() as holding:
                    self._trusted_votes = holding is not None
            self.save_cost_votes()
            self.publish_ledger()

    def publish_ledger(self) -> None:
        """Rewrite the night's ``search_ledger`` partition from its ledger (when it has rows), so
        the warehouse sees metered calls made outside the harvest too."""
        Ledger(self.lake).publish(self.night, when_empty=False)

    @property
    def harvest_lock(self) -> str:
        """The lake lock a harvest of this session's credentials holds (see ``harvest``)."""
        return harvest_lock_name(self.account)

    def spent_tonight(self, *, only: str | None = None, excluding: str | None = None) -> int:
        return Ledger(self.lake).spent(self.night, only=only, excluding=excluding, account=self.account)

    def spent_on_cap(self, resource: str) -> int:
        """Tonight's searches that count against the cap a call of ``resource`` draws on (re-runs
        share it): hand analyses, an opt-in job, have a cap of their own; the harvest and the
        questions share the other."""
        if resource == calls.HAND_ANALYSIS:
            return self.spent_tonight(only=calls.HAND_ANALYSIS)
        return self.spent_tonight(excluding=calls.HAND_ANALYSIS)

    def hooks(self, budget: Budget | None, ledger: LedgerWriter) -> dict[str, Callable[..., Future[None] | None]]:
        """The client's hooks for calls metered by ``budget`` and ``ledger`` (see :class:`CallHooks`)."""
        return CallHooks(self, budget, ledger).as_client_hooks()

    def tally_no_data(self, ledger: LedgerWriter, attempt: Attempt, kind: str | None, cost: int) -> None:
        """Count an answer without data that the service may or may not have charged (and note a
        charged answer that told no searches left: its charge is in no reading)."""
        if kind is not None and attempt.remaining_after is None:
            self._unread.add(id(ledger))
        if kind is not None and kind.endswith(NO_DATA):
            tally = self._no_data.setdefault(id(ledger), _NoData())
            tally.rows[kind] += 1
            tally.booked += cost
            if cost == 0:
                tally.unbooked_rows[kind] += 1
                tally.maybe += self.costs.cost(attempt.call.resource)
        elif kind is None and _maybe_charged(attempt.error_code):
            self._no_data.setdefault(id(ledger), _NoData()).maybe += self.costs.cost(attempt.call.resource)

    def _uncertain_cost(self, resources: Counter[str]) -> int:
        return sum(self.costs.cost(resource) * count for resource, count in resources.items())

    def _reconciliation(self, run_id: str, cost: int, outcome: str, why: str, remaining: int | None) -> dict[str, Any]:
        return {
            "called_at": datetime.now(UTC), "run_id": run_id, "resource": "unattributed", "attempt": 0, "cost": cost,
            "remaining_after": remaining, "outcome": outcome, "error": why, "duration_ms": 0.0,
            "quota_day": self.quota_day(),
        }  # fmt: skip

    def reconcile_run(self, ledger: LedgerWriter) -> int:
        """Book what the service counted during this run beyond the ledger's rows (a charged
        call whose answer never arrived, say), or short of them (lookups without data it let
        off), so that the ledger adds up to the drop in the account's searches; returns the
        searches booked (negative: given back).

        The searches left after the run come from one free call — unless every attempt of the
        run was answered, each charged one with its count: then nothing can be unexplained, and
        the fewest searches left any answer reported is the reading (the service's count after its last charge; counts only
        fall), so another client's spending is still shown, and no round trip is added to the
        end of the night. A run the quota reset fell in is not reconciled: its counts before
        and after belong to two quota days."""
        tally = self._no_data.pop(id(ledger), _NoData())
        began = self._began.pop(id(ledger), None)
        unread = id(ledger) in self._unread
        self._unread.discard(id(ledger))
        if ledger.remaining_before is None or not ledger.attempts:
            return 0
        certain = not ledger.uncertain and not unread and ledger.lowest_remaining is not None
        after = ledger.lowest_remaining if certain else self.read_remaining()
        if began is not None and self.quota_day() != began:
            log.warning("the service's daily quota reset fell during run %s: its searches left are not compared", self.run_id)
            return 0
        others = Ledger(self.lake).spent_since(ledger.started_at, except_run=self.run_id, account=self.account, login=self.login)
        extra = unexplained_charges(
            before=ledger.remaining_before, after=after, recorded=ledger.spent, others=others,
            uncertain_cost=self._uncertain_cost(ledger.uncertain) + tally.maybe, refundable=ledger.spent,
        )  # fmt: skip
        if extra > 0:
            log.warning("the service counted %d searches more than this run's answers: recorded as unattributed", extra)
            why = "RemainingSearches dropped more than the answers' costs (a call charged without an answer)"
            ledger.record(**self._reconciliation(self.run_id, extra, RECONCILED, why, after))
        elif extra < 0:
            log.info("the service counted %d searches fewer than this run's answers: given back in the ledger", -extra)
            why = "RemainingSearches dropped less than the answers' costs (lookups without data the service let off)"
            ledger.record(**self._reconciliation(self.run_id, extra, NOT_CHARGED, why, after))
        self._learn_no_data(tally, extra, uncertain=bool(ledger.uncertain))
        assert ledger.remaining_before is not None
        external = (ledger.remaining_before - after) - ledger.spent - others if after is not None else 0
        if external > 0:
            # Shown, never charged: cost 0 keeps it out of this run's spending and the night's cap.
            why = f"{external} searches spent by another client of the account during this run (not charged to it)"
            log.warning("the account dropped by %d searches more than this run's calls could cost: %s", external, why)
            ledger.record(**{**self._reconciliation(self.run_id, 0, EXTERNAL_SPENDING, why, after), "resource": "external"})
        return extra

    def _learn_no_data(self, tally: _NoData, extra: int, *, uncertain: bool) -> None:
        """A reconciliation that leaves no doubt is a vote on what a lookup without data costs:
        every one booked given back (0 each), or every one booked at 0 charged after all (its
        resource's cost each). Votes are kept like a clean reading's (see ``CostModel``)."""
        if uncertain or not tally.rows:
            return
        if tally.booked > 0 and extra == -tally.booked:
            for kind, rows in tally.rows.items():
                for _ in range(rows):
                    self.costs.vote(kind, 0)
            return
        charged_back = {kind: self.costs.cost(kind.removesuffix(NO_DATA)) for kind in tally.unbooked_rows}
        if tally.maybe > 0 and extra == tally.maybe == sum(charged_back[k] * n for k, n in tally.unbooked_rows.items()):
            for kind, rows in tally.unbooked_rows.items():
                for _ in range(rows):
                    self.costs.vote(kind, charged_back[kind])

    def reconcile_dead_runs(self, remaining_now: int | None, *, holding: frozenset[str] | None = None) -> dict[date, int]:
        """Close the runs that ended with metered calls unanswered (killed, interrupted): what the
        service charged for them — the drop in searches left since the run started, less what
        the ledger explains, at most the cost of the calls it could not see answered — is written
        to the run's own night. Returns the searches booked per night whose ledger changed.

        Only this session's account's runs (a run without an account name is the default
        credentials', whoever reconciles it next: a harvest, a question or a hand). Call it
        holding :attr:`harvest_lock` (``holding``: the harvest locks this process holds, that
        one by default): a run of another account name with the same username is closed only
        under that account's harvest lock too (taken here without waiting, else left for later)
        and only if still open, so two reconcilers never close one run, and no harvest of the
        run's account spends while counts are compared (on an object store, which has no lock,
        only this account's runs are closed). An earlier night whose ledger changed has
        its ``search_ledger`` partition written again now (tonight's is written by the run
        itself). With no reading now, nothing is closed: a later run, with a reading, reconciles
        them."""
        booked = self._reconcile_dead_runs(remaining_now, holding or frozenset({self.harvest_lock}))
        for night in booked:
            if night != self.night:
                Ledger(self.lake).publish(night)
        return booked

    def _reconcile_dead_runs(self, remaining_now: int | None, holding: frozenset[str]) -> dict[date, int]:
        book = Ledger(self.lake)
        dead = [run for run in book.dead_runs() if run.same_credentials(self.account, self.login)]
        if dead and remaining_now is None:
            log.warning("%d run(s) ended with calls unanswered; no reading of the searches left now: reconciled later", len(dead))
            return {}
        booked: dict[date, int] = {}
        for run in dead:
            with ExitStack() as held:
                if not self._may_close(run, holding, held):
                    continue
                booked_for = self._close_dead_run(book, run, remaining_now)
                if booked_for is not None:
                    booked[run.night] = booked.get(run.night, 0) + booked_for
        return booked

    def _may_close(self, run: RunLog, holding: frozenset[str], held: ExitStack) -> bool:
        name = harvest_lock_name(run.account)
        if name in holding:
            return True
        if not held.enter_context(self.lake.locks.hold(name, wait=False)):
            return False  # that account's harvest runs (or an object store): it reconciles its own
        return Ledger(self.lake).still_open(run)  # not closed by that harvest before the lock was ours

    def _close_dead_run(self, book: Ledger, run: RunLog, remaining_now: int | None) -> int | None:
        """Reconcile and close one dead run; returns what was booked (``None``: no row)."""
        others = (
            book.spent_since(run.started_at, except_run=run.run_id, account=self.account, login=self.login)
            if run.started_at
            else 0
        )
        extra = unexplained_charges(
            before=run.remaining_before, after=remaining_now, recorded=run.spent, others=others,
            uncertain_cost=self._uncertain_cost(run.uncertain),
        )  # fmt: skip
        if not run.unanswered and not extra:
            book.close_dead_run(run, None)
            return None
        unanswered = f"{len(run.unanswered)} call(s) unanswered when run {run.run_id} ended"
        if run.remaining_before is None:
            why = f"{unanswered}; it had no reading of the searches left, so their cost cannot be counted"
        else:
            why = f"{unanswered}; the service charged {extra} search(es) the ledger did not show"
        log.warning("%s (night %s)", why, run.night)
        row = self._reconciliation(run.run_id, extra, RECONCILED_AFTER_CRASH, why, remaining_now)
        if run.started_at is not None:  # charged on the dead run's quota day, not today's
            row["quota_day"] = quota_day_of(run.started_at, self.settings.quota_reset_s)
        if not book.close_dead_run(run, row):
            return None  # its writer came back, or another reconciler closed it (shared state)
        return extra


@dataclass
class CallHooks:
    """What happens around each metered call: ``before_attempt`` (:meth:`gate`) the budget's
    permission, then the write-ahead line; ``confirm_attempt`` (:meth:`confirm`) a call whose
    line took a while withdrawn when the budget stopped meanwhile; ``on_answer``
    (:meth:`answered`) the budget hears the answer arrived; ``on_attempt`` (:meth:`record`)
    the budget settled and the attempt's row written. The first and the last return the future
    of their line's write (see :class:`LedgerWriter`), which the client waits for."""

    meter: Meter
    budget: Budget | None
    ledger: LedgerWriter
    # (id of the call, attempt) → the call (kept, so its id is never another's) and its claim
    reservations: dict[tuple[int, int], tuple[calls.Call, Reservation]] = field(default_factory=dict)

    def as_client_hooks(self) -> dict[str, Callable[..., Future[None] | None]]:
        return {
            "before_attempt": self.gate,
            "confirm_attempt": self.confirm,
            "on_answer": self.answered,
            "on_attempt": self.record,
        }

    def gate(self, call: calls.Call, number: int) -> Future[None] | None:
        if not call.metered:
            return None
        if self.budget is not None:
            reservation = self.budget.reserve_call(call.resource)
            if reservation is None:
                why = self.budget.refusal(call.resource) or self.budget.stopped_reason
                raise BudgetRefused(why or "budget: no searches left for this run")
            self.reservations[id(call), number] = (call, reservation)
        return self.ledger.sent_soon(call.resource, key_digest(call.key), number)

    def confirm(self, call: calls.Call, number: int) -> None:
        """A budget stop since the gate withdraws the call before it goes out (a free call goes
        even after a stop)."""
        reason = self.budget.stopped_reason if self.budget is not None and call.metered else None
        if reason is None or not self.meter.costs.cost(call.resource):
            return
        held = self.reservations.pop((id(call), number), None)
        if self.budget is not None and held is not None:
            self.budget.withdraw(held[1])
        self.ledger.withdrawn(call.resource, key_digest(call.key), number)
        raise BudgetRefused(reason)

    def answered(self, call: calls.Call, number: int) -> None:
        held = self.reservations.get((id(call), number))
        if self.budget is not None and held is not None:
            self.budget.answered(held[1])

    def record(self, attempt: Attempt) -> Future[None] | None:
        """Settle the budget (first: an isolated call votes on the cost the row records), then
        write the row. On an object store the row rides the ledger's next PUT and the caller does
        not wait for it: a row lost with its process leaves the call unanswered, and the next run
        books what the service's count says it cost; a row that cannot be written refuses every
        later write-ahead line, so the night stops paying."""
        call = attempt.call
        if not call.metered:
            return None
        kind = _booked_as(attempt)
        held = self.reservations.pop((id(call), attempt.number), None)
        if self.budget is not None:
            self.budget.settle(
                call.resource,
                attempt.remaining_after,
                kind is not None,
                uncertain=attempt.outcome == UNCERTAIN,
                reservation=None if held is None else held[1],
                kind=None if kind == call.resource else kind,
            )
        cost = self.meter.costs.cost(kind) if kind is not None else 0
        self.meter.tally_no_data(self.ledger, attempt, kind, cost)
        written = self.ledger.record_soon(key_digest(call.key), **self._row(attempt, cost))
        return None if self.ledger.remote else written

    def _row(self, attempt: Attempt, cost: int) -> dict[str, Any]:
        key = attempt.call.key
        return dict(
            called_at=attempt.started_at,
            run_id=self.meter.run_id,
            resource=attempt.call.resource,
            network=key.get("network"),
            player=key.get("player"),
            filter_name=key.get("filter_name"),
            filter_expression=key.get("filter") or None,
            question=key.get("question"),
            attempt=attempt.number,
            cost=cost,
            remaining_after=attempt.remaining_after,
            outcome=attempt.outcome,
            error_code=attempt.error_code,
            error=attempt.error,
            duration_ms=round(attempt.duration_s * 1000, 3),
            quota_day=self.meter.quota_day(),
        )
