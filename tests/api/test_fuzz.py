"""Hostile and broken bodies: every reader either succeeds or raises ``MalformedPayload``.

The cases come from :mod:`tests.fuzz.cases` (mutated real answers, type swaps, huge numbers,
deep nesting, damaged bytes, XML attacks); :class:`~tests.fuzz.cases.Harness` runs each through
every entry point and reports anything else (see its notes). Hypothesis draws the mutations
(``st.randoms``: its choices shrink), derandomised so every run tests the same cases. The
normal run makes ~3,600 cases (each through every entry point), the ``slow`` one 2,500 more;
``benchmarks/fuzz.py`` runs the same generators for 100,000 and more.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from random import Random

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz.cases import (
    DEEP_KINDS,
    DEPTHS,
    ENTRY_POINTS,
    Case,
    Harness,
    deep_marker,
    make_case,
    seeds,
    serialise,
    xml_attacks,
)
from tourneylake.api import tree
from tourneylake.api.envelope import MalformedEnvelope, read_envelope, service_error

# Cases per hypothesis example: the summaries of one example are normalised as one batch (a
# flush costs the same for one summary or ten), as the harvest does.
BATCH = 10
FUZZ = settings(
    max_examples=100,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
# Of any seed, in either format. Bounded so `make test` stays within its time on 2 cores: the
# 100,000-case run is `benchmarks/fuzz.py` (figures in benchmarks/RESULTS.md).
LONG_FUZZ = settings(FUZZ, max_examples=250)


@pytest.fixture(scope="module")
def secret(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A file the XML attacks point at; its content must never come back."""
    path = tmp_path_factory.mktemp("fuzz") / "secret.txt"
    path.write_text("tourneylake-fuzz-secret-7Q2xv9")
    return path


@pytest.fixture(scope="module")
def harness(secret: Path) -> Harness:
    return Harness(secret)


@pytest.fixture(autouse=True)
def _quiet_out_of_range_warnings() -> Iterator[None]:
    # Out-of-range values are logged per flush; thousands of them would flood the report.
    logging.getLogger("tourneylake").setLevel(logging.ERROR)
    yield
    logging.getLogger("tourneylake").setLevel(logging.NOTSET)


def _check(harness: Harness, cases: list[Case]) -> None:
    failures = harness.run(cases)
    assert not failures, "\n\n".join(str(f) for f in failures[:5])


# The seeds in two families, each fuzzed in each format: four tests of similar cost, which
# pytest-xdist spreads over the workers.
FAMILIES = {"summaries": ("summary", "summary-full"), "others": ("metadata", "metadata-rates", "error", "countries", "news")}


@pytest.mark.parametrize("fmt", ["json", "xml"])
@pytest.mark.parametrize("family", list(FAMILIES))
@FUZZ
@given(rng=st.randoms(use_true_random=False))
def test_fuzzed_bodies(harness: Harness, secret: Path, fmt: str, family: str, rng: Random) -> None:
    # Half as many XML cases: each costs ~3x a JSON one (the readers after the parse are the
    # same; the XML parser's own attacks are tested below, case by case).
    cases = BATCH if fmt == "json" else BATCH // 2
    _check(harness, [make_case(rng, fmt=fmt, secret=secret, seed_names=FAMILIES[family]) for _ in range(cases)])


@pytest.mark.slow
@LONG_FUZZ
@given(rng=st.randoms(use_true_random=False))
def test_fuzzed_bodies_long_run(harness: Harness, secret: Path, rng: Random) -> None:
    _check(harness, [make_case(rng, secret=secret) for _ in range(BATCH)])


def test_seeded_cases_reach_every_entry_point(secret: Path) -> None:
    """The benchmark's way (one seeded Random per case): every entry point is exercised, and
    the same seed makes the same case."""
    harness = Harness(secret)
    cases = [make_case(Random(f"fuzz:{i}"), secret=secret) for i in range(300)]
    assert [c.body for c in cases[:20]] == [make_case(Random(f"fuzz:{i}"), secret=secret).body for i in range(20)]
    for start in range(0, len(cases), 50):
        _check(harness, cases[start : start + 50])
    assert all(harness.calls[entry] > 0 for entry in ENTRY_POINTS), harness.calls


# What must be refused before anything is expanded or fetched (the others are plain XML or
# fail as ill-formed).
REFUSED_FOR_SAFETY = {
    "billion-laughs",
    "quadratic-blowup",
    "external-entity",
    "external-entity-in-attribute",
    "external-dtd",
    "parameter-entity",
}
ATTACK_LABELS = [label for label, _ in xml_attacks(Path("/nowhere"))]


@pytest.mark.parametrize("label", ATTACK_LABELS)
def test_xml_attacks_are_refused_and_read_nothing(harness: Harness, secret: Path, label: str) -> None:
    body = dict(xml_attacks(secret))[label]
    _check(harness, [Case(label, "xml", body)])  # the secret is in no tree, message or table
    if label in REFUSED_FOR_SAFETY:
        with pytest.raises(tree.MalformedPayload, match="refused for safety"):
            tree.parse(body, "xml")


# Where a deep chain goes: (path of keys in the recorded summary, the key that gets it).
DEEP_PLACES = [
    (("Response", "PlayerResponse", "PlayerView", "Player", "Statistics"), "Statistic"),  # kept raw for flush
    (("Response",), "UserInfo"),  # read through nodes (the envelope)
]


@pytest.mark.parametrize("fmt", ["json", "xml"])
@pytest.mark.parametrize("depth", DEPTHS)
def test_deep_nesting_anywhere(harness: Harness, fmt: str, depth: int) -> None:
    """A chain of ``depth`` elements (objects, lists, attributes, ...) in place of a statistic
    or the UserInfo: refused or ignored, never a crash."""
    cases = []
    for kind in DEEP_KINDS:
        for parents, key in DEEP_PLACES:
            doc = orjson.loads(seeds()["summary"])
            container = doc
            for name in parents:
                container = container[name]
            container[key] = deep_marker(kind, depth)
            cases.append(Case(f"deep-{kind}-{depth}-at-{key}", fmt, serialise(doc, fmt)))
    _check(harness, cases)
    if fmt == "xml" and depth > tree.MAX_DEPTH:
        with pytest.raises(tree.TooDeeplyNested, match=f"more than {tree.MAX_DEPTH} deep"):
            tree.parse(cases[0].body, "xml")


@pytest.mark.parametrize("fmt", ["json", "xml"])
@pytest.mark.parametrize(
    "bad",
    [b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x00", b"\xef\xbb\xbf"],
    ids=["ff", "bad-continuation", "utf8-surrogate", "beyond-unicode", "nul", "bom-inside"],
)
def test_bytes_that_are_not_utf8(harness: Harness, fmt: str, bad: bytes) -> None:
    body = serialise(orjson.loads(seeds()["countries"]), fmt)
    middle = len(body) // 2
    damaged = body[:middle] + bad + body[middle:]
    cases = [Case(f"{fmt}-at-{at}", fmt, body[:at] + bad + body[at:]) for at in (0, middle, len(body))]
    cases.append(Case("text-with-surrogates", fmt, damaged.decode("utf-8", "surrogateescape")))
    _check(harness, cases)
    if bad != b"\xef\xbb\xbf":  # a BOM inside a string is a character (U+FEFF), not damage
        with pytest.raises(tree.MalformedPayload):
            tree.parse(damaged, fmt)


# ---------------------------------------------------------------------------- the envelope


def test_no_envelope_is_a_malformed_payload() -> None:
    for body in (b'{"Other": {}}', b'{"Response": {"@timestamp": "1"}}', b'{"Response": ["x"]}'):
        with pytest.raises(MalformedEnvelope, match="Response") as caught:
            read_envelope(tree.parse(body, "json"))
        assert isinstance(caught.value, tree.MalformedPayload)


def test_envelope_values_out_of_range_read_as_none() -> None:
    body = orjson.dumps(
        {
            "Response": {
                "@success": "true",
                "@timestamp": "9" * 20,
                "UserInfo": {"@loggedIn": "true", "RemainingSearches": "9" * 30, "ExpirationDate": "1e400"},
            }
        }
    )
    envelope = read_envelope(tree.parse(body, "json"))
    assert envelope.timestamp is None and envelope.remaining_searches is None
    assert envelope.user_info is not None and envelope.user_info.expiration_date is None


@pytest.mark.parametrize(
    "error",
    [{"@id": {"x": "1"}, "$": "text"}, {"@id": "200016", "$": ["text"]}, ["x"], {"@id": "9" * 40}, "", None],
    ids=["object-id", "list-text", "list", "huge-id", "empty", "null"],
)
def test_service_error_never_raises(error: object) -> None:
    body = orjson.dumps({"Response": {"@success": "false", "ErrorResponse": {"Error": error}}})
    root = tree.parse(body, "json")
    assert service_error(root, read_envelope(root), "fuzz").code == -1
