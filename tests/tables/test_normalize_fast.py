"""The normaliser's fast path (typed structs, `normalize/_fast.py`) gives exactly the tree
path's tables, warnings and errors: on the recorded answer, on sandbox answers in both formats,
and on fuzzed answers; and it is the path normal answers take."""

from __future__ import annotations

import hashlib
import logging
from datetime import date
from random import Random
from typing import Any

import httpx
import orjson
import pyarrow as pa
import pytest

from tests.fuzz.cases import make_case
from tests.helpers import DATA
from tourneylake.api import calls, tree
from tourneylake.sandbox import DEMO, SandboxServer, World
from tourneylake.tables.normalize import Rates, SummaryNormalizer, axis_types, series_types, statistic_types
from tourneylake.tables.normalize._seen import SeenKeys

NIGHT = date(2019, 12, 10)
TODAY = date(2026, 3, 1)


@pytest.fixture(scope="module")
def metadata() -> tree.Node:
    return tree.parse((DATA / "metadata-with-rates.json").read_bytes(), "json")


def _normalizer(meta: tree.Node, *, fast: bool) -> SummaryNormalizer:
    return SummaryNormalizer(
        NIGHT, Rates.from_response(meta), statistic_types(meta), series_types(meta), axis_types(meta), fast=fast
    )


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(f"{record.levelname}:{record.getMessage()}")


def _run(meta: tree.Node, roots: list[tuple[str, tree.Node]], *, fast: bool, every: int) -> dict[str, Any]:
    """Every answer added (its outcome noted), a flush every ``every``: the tables, the
    outcomes, the log, and how many answers each path read."""
    normalizer = _normalizer(meta, fast=fast)
    handler = _Records()
    logger = logging.getLogger("tourneylake")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.DEBUG)
    outcomes: list[str] = []
    parts: list[dict[str, pa.Table]] = []
    try:
        for number, (player, root) in enumerate(roots, 1):
            try:
                normalizer.add(root, network="PokerStars", player=player, fetched_at=1575947004, filter_name="f")
                outcomes.append("ok")
            except tree.MalformedPayload as exc:
                outcomes.append(f"{type(exc).__name__}: {exc}")
            if number % every == 0:
                parts.append(normalizer.flush())
        parts.append(normalizer.flush())
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    return {
        "parts": parts,
        "outcomes": outcomes,
        "log": handler.messages,
        "fast": normalizer.fast_reads,
        "tree": normalizer.tree_reads,
    }


def _assert_same(meta: tree.Node, roots: list[tuple[str, tree.Node]], every: int = 5) -> tuple[int, int]:
    fast = _run(meta, roots, fast=True, every=every)
    slow = _run(meta, roots, fast=False, every=every)
    assert slow["fast"] == 0
    assert fast["outcomes"] == slow["outcomes"]
    assert fast["log"] == slow["log"]
    assert len(fast["parts"]) == len(slow["parts"])
    for got, want in zip(fast["parts"], slow["parts"], strict=True):
        assert got.keys() == want.keys()
        for name, table in want.items():
            assert got[name].schema.equals(table.schema, check_metadata=True), name
            assert got[name].equals(table), name
    return fast["fast"], fast["tree"]


# ------------------------------------------------------------------------------ recorded


@pytest.mark.parametrize("fmt", ["json", "xml"])
def test_recorded_summary(metadata: tree.Node, fmt: str) -> None:
    body = (DATA / "recorded" / "player-summary.json").read_bytes()
    if fmt == "xml":
        body = tree.to_xml(tree.parse(body, "json").to_element())
    root = tree.parse(body, fmt)
    # the same answer for two players, and twice for one: entries are kept per player, once
    roots = [("Borbas.Geri", root), ("someone else", root), ("Borbas.Geri", root)]
    fast, slow = _assert_same(metadata, roots, every=2)
    assert (fast, slow) == (3, 0)  # the fast path reads the real answer


def test_fast_path_taken_and_refused(metadata: tree.Node) -> None:
    def recorded() -> tuple[dict, list[dict]]:  # a fresh tree each time (no tree changes after add)
        raw = orjson.loads((DATA / "recorded" / "player-summary.json").read_bytes())
        return raw["Response"], raw["Response"]["PlayerResponse"]["PlayerView"]["Player"]["RecentTournaments"]["Tournament"]

    normalizer = _normalizer(metadata, fast=True)
    response, _ = recorded()
    normalizer.add(tree.Node("Response", response), network="PokerStars", player="a")
    assert (normalizer.fast_reads, normalizer.tree_reads) == (1, 0)
    # a number where the service sends a string: read the tree way (the tests above and below
    # check that both ways agree)
    response, tournaments = recorded()
    tournaments[0]["@stake"] = 1.5
    normalizer.add(tree.Node("Response", response), network="PokerStars", player="b")
    assert (normalizer.fast_reads, normalizer.tree_reads) == (1, 1)
    # an attribute the tables do not name goes to `extra`: the tree way too
    response, tournaments = recorded()
    tournaments[1]["@series"] = "SCOOP"
    tournaments[1]["@id"] = "new-to-the-night"
    normalizer.add(tree.Node("Response", response), network="PokerStars", player="c")
    assert (normalizer.fast_reads, normalizer.tree_reads) == (1, 2)
    tables = normalizer.flush()
    assert [("series", "SCOOP")] in tables["tournaments"].column("extra").to_pylist()


# ------------------------------------------------------------------------------ sandbox


SANDBOX = dict(seed=11, today=TODAY, players=60)


def _fetch(server: SandboxServer, fmt: str, count: int) -> list[tuple[str, tree.Node]]:
    hdrs = {"Accept": f"application/{fmt}", "User-Agent": "tourneylake-tests/1", "Username": DEMO.username}
    inner = hashlib.md5(DEMO.password.encode()).hexdigest().lower()
    hdrs["Password"] = hashlib.md5((inner + DEMO.appkey.lower()).encode()).hexdigest()
    roots = []
    with httpx.Client(headers=hdrs, timeout=30) as client:
        for network, player in World(11, 60, TODAY).roster(count):
            r = client.get(f"{server.api_url}/{calls.player_summary(network, player).path}")
            assert r.status_code == 200
            roots.append((player, tree.parse(r.content, fmt)))
    return roots


@pytest.mark.parametrize("fmt", ["json", "xml"])
def test_sandbox_summaries(metadata: tree.Node, sandbox: SandboxServer, fmt: str) -> None:
    roots = _fetch(sandbox, fmt, 40)
    roots += roots[:7]  # seen again after a flush: nothing kept twice
    fast, slow = _assert_same(metadata, roots, every=9)
    assert (fast, slow) == (len(roots), 0)


# ------------------------------------------------------------------------------ fuzzed


@pytest.mark.parametrize("start", [0, 150, 300])
def test_fuzzed_summaries(metadata: tree.Node, start: int) -> None:
    """Mutated real answers (type swaps, huge numbers, reshaped lists, deep nesting, damaged
    bytes): both paths agree on every outcome, table and warning."""
    roots = []
    for i in range(start, start + 150):
        case = make_case(Random(f"fast:{i}"), seed_names=("summary",))
        try:
            roots.append((f"case-{i}", tree.parse(case.body, case.fmt)))
        except tree.MalformedPayload:
            continue
    fast, slow = _assert_same(metadata, roots, every=20)
    assert fast > 0 and slow > 0  # both paths were exercised


# ------------------------------------------------------------------------------ dedup keys


def test_seen_keys() -> None:
    seen = SeenKeys()
    keys = [hash(("PokerStars", str(i))) for i in range(1000)]
    assert seen.unseen_before(keys) == [True] * 1000
    seen.add(keys[:500])
    assert seen.unseen_before(keys) == [True] * 1000  # the batch is the caller's to check
    seen.commit()
    assert seen.unseen_before(keys) == [False] * 500 + [True] * 500
    seen.add(keys[700:])
    seen.commit()
    assert seen.unseen_before(keys) == [False] * 500 + [True] * 200 + [False] * 300
    assert len(seen) == 800 and seen.nbytes == 800 * 8
