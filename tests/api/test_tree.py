"""The one tree shape: XML and JSON of any tree read back to the same tree."""

from __future__ import annotations

import string

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tourneylake.api.tree import (
    MAX_DEPTH,
    ContainerWhereValueExpected,
    Element,
    MalformedPayload,
    TooDeeplyNested,
    parse,
    parse_json,
    parse_xml,
    to_json,
    to_xml,
)

NAMES = st.sampled_from(
    ["Data", "Y", "Tournament", "TournamentEntry", "Statistic", "Skin", "Error", "Series", "Filter", "RemainingSearches"]
)
ATTR_NAMES = st.text(alphabet=string.ascii_letters, min_size=1, max_size=8)
# XML 1.0 cannot carry control characters; the service never sends them.
TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="\x00"),
    min_size=1,
    max_size=12,
).filter(lambda t: t.strip() == t and t != "")


def elements(depth: int = 3) -> st.SearchStrategy[Element]:
    leaf = st.builds(
        Element,
        NAMES,
        st.dictionaries(
            ATTR_NAMES, st.text(max_size=10).filter(lambda t: "\x00" not in t and all(c.isprintable() for c in t)), max_size=3
        ),
        st.one_of(st.none(), TEXT, st.integers(0, 10**9).map(str)),
        st.just([]),
    )
    if depth == 0:
        return leaf
    return st.one_of(
        leaf,
        st.builds(
            Element,
            NAMES,
            st.dictionaries(ATTR_NAMES, st.text(alphabet=string.printable.strip(), max_size=10), max_size=3),
            st.none(),
            st.lists(elements(depth - 1), max_size=4),
        ),
    )


@settings(max_examples=150, deadline=None)
@given(root=elements(), keep=st.sets(NAMES))
def test_xml_and_json_read_back_to_the_same_tree(root: Element, keep: set[str]) -> None:
    document = Element("Response", {"success": "true"}, None, [root])
    expected = document.canonical()
    assert parse_xml(to_xml(document)).to_element().canonical() == expected
    # The real JSON collapses some lone children to bare objects and keeps others as lists.
    assert parse_json(to_json(document, keep_lists=keep)).to_element().canonical() == expected


def test_lone_object_list_empty_string_and_missing_all_read_as_lists() -> None:
    node = parse_json(b'{"Response": {"A": {"@x": "1"}, "B": [{"@x": "1"}, {"@x": "2"}], "C": "", "D": [{"@x": "3"}]}}')
    assert [n.attr("x") for n in node.all("A")] == ["1"]
    assert [n.attr("x") for n in node.all("B")] == ["1", "2"]
    assert len(node.all("C")) == 1 and node.one("C").text is None and node.one("C").all("X") == []
    assert [n.attr("x") for n in node.all("D")] == ["3"]
    assert node.all("Missing") == [] and node.one("Missing") is None


def test_numbers_read_as_strings() -> None:
    node = parse_json(b'{"Response": {"RemainingSearches": 149, "X": {"@id": "Count", "$": "279"}}}')
    assert node.child_text("RemainingSearches") == "149"
    assert node.one("X").text == "279" and node.one("X").attr("id") == "Count"


BILLION_LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;">]>
<Response success="true"><X>&lol2;</X></Response>"""

EXTERNAL_ENTITY = b"""<?xml version="1.0"?>
<!DOCTYPE r [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>
<Response success="true"><X>&xxe;</X></Response>"""


@pytest.mark.parametrize("body", [BILLION_LAUGHS, EXTERNAL_ENTITY])
def test_xml_entities_and_dtds_are_refused(body: bytes) -> None:
    with pytest.raises(MalformedPayload, match="refused for safety"):
        parse_xml(body)


@pytest.mark.parametrize(
    ("body", "fmt"),
    [(b'{"Response": {"@success": "tr', "json"), (b"<Response success='true'><X>", "xml"), (b"[1, 2]", "json"), (b"", "xml")],
)
def test_malformed_bodies_give_a_clear_error(body: bytes, fmt: str) -> None:
    with pytest.raises(MalformedPayload):
        parse(body, fmt)


# ------------------------------------------------------------------- hostile and broken input


def test_xml_nested_2000_deep_is_refused_with_the_path() -> None:
    body = b'<Response success="true">' + b"<Deep>" * 2000 + b"</Deep>" * 2000 + b"</Response>"
    with pytest.raises(TooDeeplyNested, match=f"more than {MAX_DEPTH} deep") as caught:
        parse(body, "xml")
    message = str(caught.value)
    assert message.startswith("Response/Deep/Deep") and len(message) < 300


def test_xml_exactly_as_deep_as_allowed_is_read() -> None:
    body = b"<Response>" + b"<A>" * (MAX_DEPTH - 1) + b"x" + b"</A>" * (MAX_DEPTH - 1) + b"</Response>"
    node = parse(body, "xml")
    assert node.find("/".join(["A"] * (MAX_DEPTH - 1))).text == "x"
    node.to_element()


def test_deep_json_is_refused_where_it_is_read() -> None:
    """orjson reads up to 1,024 levels; a node refuses to step below MAX_DEPTH, so the deep part
    fails only when something reads it, and every reader (the recursive ones too) stays safe."""
    with pytest.raises(MalformedPayload, match="not valid JSON"):
        parse(b'{"Response": ' + b"[" * 1100 + b"]" * 1100 + b"}", "json")
    node = parse(b'{"Response": {"@success": "true", "A": ' + b'{"A": ' * 500 + b'"x"' + b"}" * 500 + b"}}", "json")
    assert node.attr("success") == "true"
    with pytest.raises(TooDeeplyNested, match=r"^Response/A/A/A.*more than 64 deep"):
        node.to_element()
    with pytest.raises(TooDeeplyNested):
        node.find("/".join(["A"] * 100))


@pytest.mark.parametrize("garbage", [{"x": "BODY-TEXT"}, ["BODY-TEXT"]])
def test_an_object_or_list_where_a_value_must_be_is_refused(garbage: object) -> None:
    """Never the object's repr as a value: an error naming the element, not quoting the body."""
    node = parse(orjson.dumps({"Response": {"Statistic": [{"@id": "Count"}, {"@id": garbage, "$": garbage}]}}), "json")
    bad = node.all("Statistic")[1]
    for read in (lambda: bad.attr("id"), lambda: bad.attrs, lambda: bad.text, node.to_element):
        with pytest.raises(ContainerWhereValueExpected, match=r"^Response/Statistic/(@id|\$): an? (object|list)") as caught:
            read()
        assert "BODY-TEXT" not in str(caught.value)
    assert node.all("Statistic")[0].attr("id") == "Count"


def test_a_list_of_lists_has_no_text() -> None:
    node = parse(b'{"Response": {"X": [["a"], "b"]}}', "json")
    first, second = node.all("X")
    assert second.text == "b"
    with pytest.raises(ContainerWhereValueExpected, match=r"^Response/X: a list"):
        first.text  # noqa: B018 - the property is what is tested


def test_null_attributes_are_absent() -> None:
    node = parse(b'{"Response": {"@a": null, "@b": 1, "@c": true}}', "json")
    assert node.attr("a") is None and node.attrs == {"b": "1", "c": "true"}


@pytest.mark.parametrize(
    ("body", "fmt"),
    [
        (None, "json"),
        (123, "xml"),
        (b'<?xml version="1.0" encoding="x-nope"?><Response/>', "xml"),
        ("<Response>\udc80</Response>", "xml"),
        ('{"Response": "\udc80"}', "json"),
        (b'{"Response": "\xff"}', "json"),
        (b"<Response>\xff</Response>", "xml"),
        (b'{"Response": 1e400}', "json"),
        (b"{}", "yaml"),
    ],
    ids=["none", "int", "unknown-encoding", "xml-text-surrogate", "json-text-surrogate", "json-ff", "xml-ff", "inf", "format"],
)
def test_anything_that_is_not_a_body_is_a_malformed_payload(body: object, fmt: str) -> None:
    with pytest.raises(MalformedPayload):
        parse(body, fmt)  # type: ignore[arg-type]
