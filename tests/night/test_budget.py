"""The budget: planning a night, learning costs, and the concurrent run-time guard."""

from __future__ import annotations

import threading
from datetime import date

import pytest

from tourneylake.night.budget import (
    HAND_ANALYSIS,
    METADATA,
    NLQ,
    PLAYER_SUMMARY,
    Budget,
    CostModel,
    Known,
    Limits,
    Target,
    plan_night,
)

TONIGHT = date(2026, 11, 22)


def t(
    player: str, priority: int = 100, filter_name: str | None = None, expression: str | None = None, network: str = "PokerStars"
) -> Target:
    return Target(network, player, filter_name, expression, priority)


def plan(targets, **overrides):
    arguments = dict(
        last_fetched={},
        harvested_tonight=set(),
        remaining=None,
        max_searches_per_run=None,
        reserve=0,
        costs=CostModel(),
        known_networks=None,
        filter_problems={},
        run_date=TONIGHT,
    )
    arguments.update(overrides)
    limits = Limits(*(arguments.pop(name) for name in ("remaining", "max_searches_per_run", "reserve", "costs")))
    return plan_night(targets, Known(**arguments), limits)


def names(targets) -> list[str]:
    return [target.player for target in targets]


# ----------------------------------------------------------------------------------- ordering


def test_order_never_fetched_then_stalest_then_priority_then_watchlist_order() -> None:
    targets = [
        t("fresh-important", priority=1),
        t("stale", priority=50),
        t("never-low", priority=200),
        t("never-high", priority=1),
        t("never-high-2", priority=1),
        t("stalest", priority=100),
        t("fresh-less", priority=5),
    ]
    last = {
        t("fresh-important").key: date(2026, 11, 21),
        t("fresh-less").key: date(2026, 11, 21),
        t("stale").key: date(2026, 11, 1),
        t("stalest").key: date(2026, 10, 1),
    }
    result = plan(targets, last_fetched=last)
    assert names(result.calls) == [
        "never-high",
        "never-high-2",
        "never-low",
        "stalest",
        "stale",
        "fresh-important",
        "fresh-less",
    ]
    assert result.searches_planned == 7
    assert result.deferred == [] and result.skipped == []
    assert result.affordable is None


# ----------------------------------------------------------------------------------- bounds


def test_run_cap_defers_the_rest() -> None:
    targets = [t(f"p{i}") for i in range(5)]
    result = plan(targets, max_searches_per_run=3, remaining=1000, reserve=100)
    assert names(result.calls) == ["p0", "p1", "p2"]
    assert [(x.player, why) for x, why in result.deferred] == [
        ("p3", "budget: run cap 3 reached"),
        ("p4", "budget: run cap 3 reached"),
    ]
    assert result.searches_planned == 3
    assert result.affordable == 3


def test_reserve_is_never_crossed() -> None:
    targets = [t(f"p{i}") for i in range(5)]
    result = plan(targets, max_searches_per_run=50, remaining=102, reserve=100)
    assert names(result.calls) == ["p0", "p1"]
    assert {why for _, why in result.deferred} == {"budget: reserve 100 reached"}
    assert result.affordable == 2


def test_below_reserve_plans_nothing() -> None:
    result = plan([t("a"), t("b")], remaining=80, reserve=100)
    assert result.calls == [] and result.searches_planned == 0
    assert [why for _, why in result.deferred] == ["budget: reserve 100 reached"] * 2
    assert result.affordable == 0


def test_binding_bound_names_the_reason() -> None:
    # Both bounds bite at once: the run cap is reported when it is the tighter (or equal) one.
    result = plan([t("a"), t("b")], max_searches_per_run=1, remaining=101, reserve=100)
    assert result.deferred[0][1] == "budget: run cap 1 reached"
    result = plan([t("a"), t("b"), t("c")], max_searches_per_run=2, remaining=101, reserve=100)
    assert result.deferred[0][1] == "budget: reserve 100 reached"


def test_unknown_remaining_and_no_cap_is_unlimited() -> None:
    result = plan([t(f"p{i}") for i in range(20)], remaining=None, max_searches_per_run=None, reserve=100)
    assert len(result.calls) == 20


def test_learned_costs_are_used() -> None:
    costs = CostModel()
    costs.observe(PLAYER_SUMMARY, 100, 98)
    costs.observe(PLAYER_SUMMARY, 98, 96)
    result = plan([t("a"), t("b"), t("c")], max_searches_per_run=5, costs=costs)
    assert names(result.calls) == ["a", "b"]
    assert result.searches_planned == 4


def test_question_filters_pay_one_conversion() -> None:
    targets = [
        t("a", filter_name="q"),  # question not converted yet
        t("b", filter_name="q"),
        t("c", filter_name="s", expression="Class:SNG"),
    ]
    result = plan(targets, max_searches_per_run=4)
    assert names(result.calls) == ["a", "b", "c"]
    assert result.conversions == ["q"]
    assert result.searches_planned == 4
    # When the conversion does not fit, a cheaper call later in the order still does.
    result = plan(targets, max_searches_per_run=1)
    assert names(result.calls) == ["c"]
    assert names(target for target, _ in result.deferred) == ["a", "b"]
    assert result.conversions == []


# ----------------------------------------------------------------------------------- skips


def test_skips_cost_nothing() -> None:
    targets = [
        t("ok"),
        t("foo", network="Foo"),
        t("case", network="pokerstars"),
        t("bad-meta", filter_name="big", expression="Stake:XYZ1"),
        t("bad-syntax", filter_name="typo", expression="Class:SNG;;"),
        t("done"),
        t("done-by-date"),
    ]
    result = plan(
        targets,
        known_networks={"PokerStars", "WPN"},
        filter_problems={"big": "currency XYZ is not one metadata lists at position 6"},
        harvested_tonight={t("done").key},
        last_fetched={t("done-by-date").key: TONIGHT},
        remaining=1000,
        reserve=0,
    )
    assert names(result.calls) == ["ok"]
    assert result.searches_planned == 1
    reasons = {target.player: why for target, why in result.skipped}
    assert reasons["foo"] == "unknown network 'Foo' (not in metadata)"
    assert reasons["case"] == "unknown network 'pokerstars' (not in metadata; did you mean 'PokerStars'?)"
    assert reasons["bad-meta"] == "invalid filter 'big': currency XYZ is not one metadata lists at position 6"
    assert reasons["bad-syntax"].startswith("invalid filter 'typo': empty constraint")
    assert reasons["done"] == "already harvested for 2026-11-22"
    assert reasons["done-by-date"] == "already harvested for 2026-11-22"


def test_a_pair_not_found_lately_costs_nothing_until_its_weekly_retry() -> None:
    week_ago, yesterday = date(2026, 11, 15), date(2026, 11, 21)
    result = plan(
        [t("gone"), t("back"), t("ok")],
        not_found={("PokerStars", "gone", ""): yesterday, ("PokerStars", "back", ""): week_ago},
        remaining=100,
    )
    assert names(result.calls) == ["back", "ok"]  # a week after its "not found": asked again
    assert result.skipped == [
        (t("gone"), "not found by the service on 2026-11-21: asked again on 2026-11-28 (a search a week, not a night)")
    ]


def test_a_deferral_names_the_quota_when_the_account_could_not_pay_even_without_a_reserve() -> None:
    result = plan([t("a"), t("b"), t("c")], remaining=2, reserve=0)
    assert result.deferred == [(t("c"), "quota: 0 searches left until the reset")]
    result = plan([t("a"), t("b"), t("c")], remaining=3, reserve=1)
    assert result.deferred == [(t("c"), "budget: reserve 1 reached")]


def test_rerunning_a_finished_night_plans_nothing() -> None:
    targets = [t("a"), t("b", filter_name="f", expression="Date:30D")]
    result = plan(targets, harvested_tonight={x.key for x in targets}, remaining=500)
    assert result.calls == [] and result.searches_planned == 0
    assert len(result.skipped) == 2


def test_empty_filter_name_in_keys_means_unfiltered() -> None:
    # The ledger writes unfiltered as "": it must still match the target with filter_name None.
    result = plan(
        [t("a"), t("b"), t("c")],
        harvested_tonight={("PokerStars", "a", "")},
        last_fetched={("PokerStars", "b", ""): date(2026, 11, 1)},
    )
    assert names(result.calls) == ["c", "b"]
    assert [(x.player, why) for x, why in result.skipped] == [("a", "already harvested for 2026-11-22")]


def test_duplicate_targets_are_planned_once() -> None:
    targets = [t("a", priority=5), t("b"), t("a", priority=1), t("a", filter_name="f", expression="Date:1Y")]
    result = plan(targets)
    assert [(x.player, x.filter_name) for x in result.calls] == [("a", None), ("b", None), ("a", "f")]
    assert result.calls[0].priority == 5  # the first entry wins
    assert [(x.player, why) for x, why in result.skipped] == [("a", "duplicate target: already listed earlier")]
    assert result.searches_planned == 3


# ----------------------------------------------------------------------------------- costs


def test_cost_model_prior_and_learning() -> None:
    costs = CostModel()
    assert costs.cost(PLAYER_SUMMARY) == 1
    assert costs.cost(NLQ) == 1
    assert costs.cost(HAND_ANALYSIS) == 5
    assert costs.cost(METADATA) == 0
    assert costs.cost("something_new") == 1  # assumed metered until observed

    assert not costs.observe(PLAYER_SUMMARY, 350, 150)  # someone else spent 199 meanwhile: not a price
    assert not costs.observe(PLAYER_SUMMARY, 150, 150)  # let off (a player not found): not a price either
    assert costs.observe(PLAYER_SUMMARY, 152, 150)
    assert costs.cost(PLAYER_SUMMARY) == 1  # one reading: outvoted
    assert costs.observe(PLAYER_SUMMARY, 150, 148)
    assert costs.cost(PLAYER_SUMMARY) == 2  # two readings agree
    assert costs.observe(PLAYER_SUMMARY, 148, 147)
    assert costs.cost(PLAYER_SUMMARY) == 1  # 1 (the documented vote) and 1 against 2 and 2: a tie it wins
    assert costs.observe(PLAYER_SUMMARY, 147, 146)
    assert costs.observe(PLAYER_SUMMARY, 146, 136)  # one polluted reading does not move it
    assert costs.cost(PLAYER_SUMMARY) == 1

    assert not costs.observe(PLAYER_SUMMARY, 10, 500)  # top-up or reset: ignored
    assert not costs.observe(PLAYER_SUMMARY, None, 5)
    assert costs.snapshot()[HAND_ANALYSIS] == 5


def test_cost_model_window_forgets_old_readings() -> None:
    costs = CostModel(window=3)
    for _ in range(3):
        costs.observe(HAND_ANALYSIS, 10, 5)
    for _ in range(3):
        costs.observe(HAND_ANALYSIS, 10, 6)
    assert costs.cost(HAND_ANALYSIS) == 4  # the 5s are forgotten


# ----------------------------------------------------------------------------------- guard


def test_budget_guard_cap_and_reserve() -> None:
    budget = Budget(remaining=105, max_searches_per_run=3, reserve=100, costs=CostModel())
    assert budget.try_reserve(PLAYER_SUMMARY)
    assert budget.try_reserve(PLAYER_SUMMARY)
    assert budget.try_reserve(PLAYER_SUMMARY)
    assert not budget.try_reserve(PLAYER_SUMMARY)  # cap, counting in-flight
    assert budget.refusal(PLAYER_SUMMARY) == "budget: run cap 3 reached"
    assert budget.try_reserve(METADATA)  # free calls are always fine
    for after in (104, 103, 102):
        budget.settle(PLAYER_SUMMARY, after, charged=True)
    assert budget.spent == 3 and budget.remaining == 102 and budget.in_flight == 0

    budget = Budget(remaining=102, max_searches_per_run=None, reserve=100, costs=CostModel())
    assert budget.try_reserve(PLAYER_SUMMARY) and budget.try_reserve(PLAYER_SUMMARY)
    assert not budget.try_reserve(PLAYER_SUMMARY)
    assert budget.refusal(PLAYER_SUMMARY) == "budget: reserve 100 reached"
    assert not budget.try_reserve(HAND_ANALYSIS)


def test_a_reading_that_shows_a_call_still_in_flight_does_not_count_it_twice() -> None:
    """Call A's answer arrives; B is reserved and sent, and B's answer is read before A's body
    is (a slot is free as soon as an answer arrives). B's reading (1 left) already shows A's
    charge: C may go, down to the reserve and no further. Before, A counted twice and C was
    refused with a search left (a night's player deferred for nothing)."""
    budget = Budget(remaining=3, max_searches_per_run=None, reserve=0, costs=CostModel())
    a = budget.reserve_call(PLAYER_SUMMARY)
    assert a is not None
    budget.answered(a)
    b = budget.reserve_call(PLAYER_SUMMARY)
    assert b is not None
    budget.answered(b)
    budget.settle(PLAYER_SUMMARY, 1, charged=True, reservation=b)  # B first: A's reading comes later
    c = budget.reserve_call(PLAYER_SUMMARY)
    assert c is not None
    assert budget.reserve_call(PLAYER_SUMMARY) is None  # the last search is C's
    assert budget.refusal(PLAYER_SUMMARY) == "quota: 0 searches left until the reset"
    budget.settle(PLAYER_SUMMARY, 2, charged=True, reservation=a)  # A's older reading changes nothing
    assert budget.remaining == 1 and budget.in_flight == 1 and budget.reserve_call(PLAYER_SUMMARY) is None
    budget.settle(PLAYER_SUMMARY, 0, charged=True, reservation=c)
    assert budget.spent == 3 and budget.remaining == 0 and budget.in_flight == 0


def test_a_reading_does_not_show_a_call_whose_answer_had_not_arrived() -> None:
    """A and B in flight together (A's answer not yet arrived when B was reserved): B's reading
    may have been written before A was charged, so A still counts against the reserve."""
    budget = Budget(remaining=3, max_searches_per_run=None, reserve=0, costs=CostModel())
    a = budget.reserve_call(PLAYER_SUMMARY)
    b = budget.reserve_call(PLAYER_SUMMARY)
    assert a is not None and b is not None
    budget.answered(b)
    budget.answered(a)  # after B was reserved
    budget.settle(PLAYER_SUMMARY, 2, charged=True, reservation=b)
    assert budget.reserve_call(PLAYER_SUMMARY) is not None  # 2 left - A - this one = 0
    assert budget.reserve_call(PLAYER_SUMMARY) is None


def test_a_refusal_the_calls_in_flight_make_ambiguous_says_to_wait_for_them() -> None:
    """A and B overlap; B's reading (1 left) shows A's charge too, but A's answer arrived after B
    was reserved, so A still counts: a third call is refused with a search left. Waiting helps:
    once A settles, the reading is exact and the call may go. A refusal nothing in flight can
    change, and a stop, say so (no mark)."""
    budget = Budget(remaining=3, max_searches_per_run=None, reserve=0, costs=CostModel())
    a, b = budget.reserve_call(PLAYER_SUMMARY), budget.reserve_call(PLAYER_SUMMARY)
    assert a is not None and b is not None
    budget.answered(b)
    budget.answered(a)
    budget.settle(PLAYER_SUMMARY, 1, charged=True, reservation=b)
    assert budget.refusal(PLAYER_SUMMARY) == "quota: 0 searches left until the reset"
    mark = budget.wait_mark(PLAYER_SUMMARY)
    assert mark is not None and not budget.settled_since(mark)
    budget.settle(PLAYER_SUMMARY, 2, charged=True, reservation=a)  # an older reading: 1 stays
    assert budget.settled_since(mark) and budget.refusal(PLAYER_SUMMARY) is None
    assert budget.try_reserve(PLAYER_SUMMARY)
    budget.settle(PLAYER_SUMMARY, 0, charged=True)
    assert budget.refusal(PLAYER_SUMMARY) is not None and budget.wait_mark(PLAYER_SUMMARY) is None
    assert budget.wait_mark(METADATA) is None  # free: never refused
    assert budget.try_reserve(METADATA)


def test_a_claim_settled_by_another_settle_judges_nothing_by_its_reading() -> None:
    """A settle without a claim takes the oldest of its resource, which may be another call's:
    that call's own settle then finds its claim gone and takes a younger one, reserved after a
    hand analysis's answer arrived. Its reading is still not taken to show that charge."""
    budget = Budget(remaining=30, max_searches_per_run=None, reserve=0, costs=CostModel())
    hand = CostModel().cost(HAND_ANALYSIS)
    a = budget.reserve_call(PLAYER_SUMMARY)
    h = budget.reserve_call(HAND_ANALYSIS)
    assert a is not None and h is not None
    budget.answered(h)
    assert budget.try_reserve(PLAYER_SUMMARY)  # X, without a claim, after H's answer arrived
    budget.settle(PLAYER_SUMMARY, 29, charged=True)  # X's answer: takes A's claim, the oldest
    budget.settle(PLAYER_SUMMARY, 20, charged=True, reservation=a)  # A (sent before H's answer): takes X's
    assert budget.in_flight == hand
    made = 0
    while budget.reserve_call(PLAYER_SUMMARY) is not None:
        made += 1
    assert made == 20 - hand  # H still counts against the reserve


def test_searches_the_service_let_off_come_back_to_the_run_cap() -> None:
    """Three calls in flight together, two of them lookups without data booked at a search each
    that the service did not charge (its count fell by one): once none is in flight, the cap
    takes back what the count shows was not spent. With calls in flight, or another client's
    spending in the count, nothing comes back that was spent."""
    budget = Budget(remaining=100, max_searches_per_run=3, reserve=0, costs=CostModel())
    calls = [budget.reserve_call(PLAYER_SUMMARY) for _ in range(3)]
    for call, kind in zip(calls, (None, "player_summary:no_data", "player_summary:no_data"), strict=True):
        assert call is not None
        budget.settle(PLAYER_SUMMARY, 99, charged=True, reservation=call, kind=kind)
    assert budget.spent == 3 and budget.refusal(PLAYER_SUMMARY) == "budget: run cap 3 reached"
    assert budget.true_up() and budget.spent == 1 and not budget.true_up()  # the count fell by 1
    more = [budget.reserve_call(PLAYER_SUMMARY) for _ in range(2)]
    assert None not in more and not budget.true_up()  # in flight: nothing to take back yet
    for call, after in zip(more, (98, 97), strict=True):
        budget.settle(PLAYER_SUMMARY, after, charged=True, reservation=call)
    assert budget.refusal(PLAYER_SUMMARY) == "budget: run cap 3 reached" and not budget.true_up()
    other = Budget(remaining=100, max_searches_per_run=2, reserve=0, costs=CostModel())
    for _ in range(2):
        assert other.try_reserve(PLAYER_SUMMARY)
        other.settle(PLAYER_SUMMARY, 95, charged=True)  # someone else spent 3 meanwhile
    assert not other.true_up() and other.spent == 2


def test_budget_failed_call_releases_its_reservation() -> None:
    budget = Budget(remaining=101, max_searches_per_run=None, reserve=100, costs=CostModel())
    assert budget.try_reserve(PLAYER_SUMMARY)
    assert not budget.try_reserve(PLAYER_SUMMARY)
    budget.settle(PLAYER_SUMMARY, None, charged=False)  # transport error: not charged
    assert budget.spent == 0 and budget.remaining == 101
    assert budget.try_reserve(PLAYER_SUMMARY)


def test_calls_that_timed_out_count_against_the_run_cap() -> None:
    """A call with no answer (a timeout after sending) may have been charged: the cap counts
    it, so calls that time out and are sent again can never take the run past its cap. What it
    really cost is the reconciliation's; it is not in ``spent``, and the searches left are the
    next answer's."""
    budget = Budget(remaining=1000, max_searches_per_run=3, reserve=0, costs=CostModel())
    for _ in range(2):
        assert budget.try_reserve(PLAYER_SUMMARY)
        budget.settle(PLAYER_SUMMARY, None, charged=False, uncertain=True)
    assert budget.try_reserve(PLAYER_SUMMARY)
    budget.settle(PLAYER_SUMMARY, 997, charged=True)
    assert not budget.try_reserve(PLAYER_SUMMARY)  # 1 charged + 2 that may have been
    assert budget.refusal(PLAYER_SUMMARY) == "budget: run cap 3 reached"
    assert budget.spent == 1 and budget.remaining == 997

    free = Budget(remaining=1000, max_searches_per_run=1, reserve=0, costs=CostModel())
    assert free.try_reserve(PLAYER_SUMMARY)
    free.settle(PLAYER_SUMMARY, None, charged=False)  # refused before any work (a 5xx): free
    assert free.try_reserve(PLAYER_SUMMARY)


def test_budget_learns_cost_only_from_isolated_calls() -> None:
    costs = CostModel()
    budget = Budget(remaining=100, max_searches_per_run=None, reserve=0, costs=costs)
    assert budget.try_reserve(PLAYER_SUMMARY)
    budget.settle(PLAYER_SUMMARY, 97, charged=True)  # alone: a clean reading, one vote
    assert costs.cost(PLAYER_SUMMARY) == 1 and budget.spent == 1 and budget.remaining == 97
    assert budget.try_reserve(PLAYER_SUMMARY)
    budget.settle(PLAYER_SUMMARY, 94, charged=True)  # a second that agrees: learned, and charged
    assert costs.cost(PLAYER_SUMMARY) == 3 and budget.spent == 4 and budget.remaining == 94

    costs = CostModel()
    budget = Budget(remaining=100, max_searches_per_run=None, reserve=0, costs=costs)
    assert budget.try_reserve(PLAYER_SUMMARY) and budget.try_reserve(PLAYER_SUMMARY)
    budget.settle(PLAYER_SUMMARY, 98, charged=True)
    budget.settle(PLAYER_SUMMARY, 99, charged=True)  # stale, out of order: never raises remaining
    assert costs.cost(PLAYER_SUMMARY) == 1  # still the prior
    assert budget.remaining == 98 and budget.spent == 2


def test_budget_stops_learning_after_an_abandoned_call() -> None:
    """A call that timed out may still be charged by the service later: the next isolated
    reading could include its cost, so it must not teach the cost model."""
    costs = CostModel()
    budget = Budget(remaining=100, max_searches_per_run=None, reserve=0, costs=costs)
    assert budget.try_reserve(PLAYER_SUMMARY)
    budget.settle(PLAYER_SUMMARY, None, charged=False)  # timed out: no reading
    assert budget.try_reserve(PLAYER_SUMMARY)
    budget.settle(PLAYER_SUMMARY, 98, charged=True)  # dropped 2: ours and the abandoned one
    assert costs.cost(PLAYER_SUMMARY) == 1
    assert budget.remaining == 98


def test_budget_without_a_reading_estimates_and_does_not_learn() -> None:
    costs = CostModel()
    budget = Budget(remaining=100, max_searches_per_run=None, reserve=0, costs=costs)
    assert budget.try_reserve(PLAYER_SUMMARY)
    budget.settle(PLAYER_SUMMARY, None, charged=True)
    assert budget.remaining == 99
    assert budget.try_reserve(PLAYER_SUMMARY)
    budget.settle(PLAYER_SUMMARY, 90, charged=True)  # the "before" was an estimate: no lesson
    assert costs.cost(PLAYER_SUMMARY) == 1  # still the prior
    assert budget.remaining == 90


def test_budget_unknown_remaining_allows_one_probe() -> None:
    budget = Budget(remaining=None, max_searches_per_run=None, reserve=10, costs=CostModel())
    assert budget.try_reserve(PLAYER_SUMMARY)
    assert not budget.try_reserve(PLAYER_SUMMARY)
    assert "unknown" in (budget.refusal(PLAYER_SUMMARY) or "")
    budget.settle(PLAYER_SUMMARY, 11, charged=True)
    assert budget.remaining == 11
    assert budget.try_reserve(PLAYER_SUMMARY)
    assert not budget.try_reserve(PLAYER_SUMMARY)


def test_budget_stop() -> None:
    budget = Budget(remaining=1000, max_searches_per_run=None, reserve=0, costs=CostModel())
    budget.stop("quota: 102002 daily searches quota used up")
    budget.stop("second reason is not kept")
    assert budget.stopped_reason == "quota: 102002 daily searches quota used up"
    assert not budget.try_reserve(PLAYER_SUMMARY)
    assert budget.refusal(PLAYER_SUMMARY) == "stopped: quota: 102002 daily searches quota used up"
    assert budget.try_reserve(METADATA)


def test_budget_rejects_negative_bounds() -> None:
    with pytest.raises(ValueError, match="reserve"):
        Budget(remaining=1, max_searches_per_run=None, reserve=-1, costs=CostModel())
    with pytest.raises(ValueError, match="max_searches_per_run"):
        Budget(remaining=1, max_searches_per_run=-1, reserve=0, costs=CostModel())


@pytest.mark.parametrize(("cap", "remaining", "reserve", "allowed"), [(25, 10_000, 0, 25), (None, 140, 100, 40)])
def test_budget_guard_under_threads(cap: int | None, remaining: int, reserve: int, allowed: int) -> None:
    budget = Budget(remaining=remaining, max_searches_per_run=cap, reserve=reserve, costs=CostModel())
    made: list[int] = []
    made_lock = threading.Lock()
    start = threading.Barrier(8)

    def worker() -> None:
        start.wait()
        for _ in range(200):  # bounded: far more attempts than the budget allows
            if not budget.try_reserve(PLAYER_SUMMARY):
                continue
            with made_lock:
                made.append(1)
                server_left = remaining - len(made)
            budget.settle(PLAYER_SUMMARY, server_left, charged=True)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert not any(thread.is_alive() for thread in threads)
    assert len(made) == allowed
    assert budget.spent == allowed
    assert budget.in_flight == 0
    assert budget.remaining == remaining - allowed
    assert budget.remaining >= reserve


def test_cost_model_starts_from_earlier_votes_and_hands_over_only_its_own() -> None:
    costs = CostModel(votes={PLAYER_SUMMARY: [2]})
    assert costs.cost(PLAYER_SUMMARY) == 1  # one earlier vote: outvoted
    assert costs.observe(PLAYER_SUMMARY, 10, 8)
    assert costs.cost(PLAYER_SUMMARY) == 2  # with this run's, two agree
    assert costs.take_new_votes() == {PLAYER_SUMMARY: [2]} and costs.take_new_votes() == {}
    assert CostModel(votes={PLAYER_SUMMARY: [0, 0, 0], HAND_ANALYSIS: [500, 500]}).snapshot()[PLAYER_SUMMARY] == 1
    assert CostModel(votes={HAND_ANALYSIS: [500, 500]}).cost(HAND_ANALYSIS) == 5  # kept votes are checked too
    assert CostModel(votes={HAND_ANALYSIS: ["6", 6.0, True, None, 6]}).cost(HAND_ANALYSIS) == 5  # one vote, not four
