"""``/metadata`` → reference tables, and the USD rates every money column is converted with.

Only ``Currency/@rate`` is documented by the service; the rest of the shape comes from a
recorded real response (``tests/data/recorded/``). Every group is optional: a missing group gives an
empty table, a lone child given as a bare object reads like a list of one.

Everything is read through :class:`~tourneylake.api.tree.Node`, so structural garbage (an object
where an attribute's value must be, nesting beyond any real answer) raises
:class:`~tourneylake.api.tree.MalformedPayload` naming the element; a rate that is no finite
positive number is unknown (NULL), never a wrong conversion.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date
from typing import Any

import pyarrow as pa

from tourneylake.api.tree import MalformedPayload, Node, check_value, element_path
from tourneylake.lake.raw import as_date
from tourneylake.schemas import SCHEMAS
from tourneylake.tables.normalize import _columns as C

__all__ = [
    "Rates",
    "metadata_payload",
    "normalize_metadata",
    "series_types",
    "statistic_types",
]

USD = "USD"


def metadata_payload(response: Node) -> Node:
    """The ``MetadataResponse`` node, given it or the ``Response`` root."""
    if response.name == "MetadataResponse":
        return response
    payload = response.one("MetadataResponse")
    if payload is None:
        raise MalformedPayload("not a metadata response: no MetadataResponse element")
    return payload


def _rate(value: Any) -> float | None:
    """A usable rate (units per USD): a finite positive number, else unknown."""
    if value is None:
        return None
    try:
        rate = float(value)
    except (TypeError, ValueError):
        return None
    return rate if math.isfinite(rate) and rate > 0 else None


@dataclass(frozen=True)
class Rates:
    """USD conversion rates of one metadata snapshot (units of a currency per 1 USD).

    ``rate`` never guesses: an unknown currency, or one whose rate metadata omitted, has none.
    USD itself is always rate 1, by definition, so USD amounts convert even with metadata that
    carries no rates.
    """

    rates: Mapping[str, float | None] = field(default_factory=dict)

    @classmethod
    def from_response(cls, response: Node) -> Rates:
        payload = metadata_payload(response)
        currencies = payload.one("Currencies")
        rates: dict[str, float | None] = {}
        for currency in currencies.all("Currency") if currencies else []:
            iso = currency.attr("iso")
            if iso:
                rates[iso] = _rate(currency.attr("rate"))
        return cls(rates)

    @classmethod
    def from_table(cls, currencies: pa.Table) -> Rates:
        isos = currencies.column("iso").to_pylist()
        values = currencies.column("rate").to_pylist()
        known = currencies.column("rate_known").to_pylist() if "rate_known" in currencies.column_names else [True] * len(isos)
        return cls({iso: (_rate(v) if k else None) for iso, v, k in zip(isos, values, known, strict=True) if iso})

    def rate(self, currency: str | None) -> float | None:
        if currency is None:
            return None
        if currency == USD:
            return 1.0
        return self.rates.get(currency)


def _table(name: str, columns: dict[str, pa.Array | list[Any]], n: int, night: date) -> pa.Table:
    schema = SCHEMAS[name]
    arrays = []
    for f in schema:
        if f.name == "snapshot_date":
            arrays.append(pa.array([night] * n, pa.date32()))
        else:
            col = columns[f.name]
            arrays.append(col if isinstance(col, pa.Array) else pa.array(col, f.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def _currencies(payload: Node, night: date, metadata_hash: str | None) -> pa.Table:
    node = payload.one("Currencies")
    rows = node.all("Currency") if node else []
    iso, symbol, rate, known, extra = [], [], [], [], []
    for c in rows:
        code = c.attr("iso")
        r = _rate(c.attr("rate"))
        if code == USD and r is None:
            r = 1.0
        iso.append(code)
        symbol.append(c.attr("symbol"))
        rate.append(r)
        known.append(r is not None)
        extra.append({k: v for k, v in c.attrs.items() if k not in ("iso", "symbol", "rate")})
    cols = {
        "iso": iso,
        "symbol": symbol,
        "rate": rate,
        "rate_known": known,
        "metadata_hash": [metadata_hash] * len(iso),
        "extra": C.map_array(extra),
    }
    return _table("currencies", cols, len(iso), night)


_NETWORK_ATTRS = {
    "name": "name",
    "code": "code",
    "region": "region",
}
_NETWORK_BOOLS = {"closed": "closed", "searchable": "searchable", "hud_coverage": "hudCoverage"}
_NETWORK_TEXT = {
    "coverage_stage": "CoverageStage",
    "full_coverage_start": "FullCoverageStartDate",
    "full_coverage_tracking_rate": "FullCoverageTrackingRate",
    "earliest_game_tracked": "EarliestGameTrackedDate",
}
_NETWORK_KNOWN = {
    "@name",
    "@code",
    "@region",
    "@closed",
    "@searchable",
    "@hudCoverage",
    "Skins",
    "TrackedGamesCount",
    *_NETWORK_TEXT.values(),
}


def _networks(payload: Node, night: date) -> pa.Table:
    node = payload.one("Networks")
    rows = node.all("Network") if node else []
    cols: dict[str, list[Any]] = {
        k: [] for k in [*_NETWORK_ATTRS, *_NETWORK_BOOLS, *_NETWORK_TEXT, "tracked_games_count", "skins", "skin_count", "extra"]
    }
    for n in rows:
        for col, attr in _NETWORK_ATTRS.items():
            cols[col].append(n.attr(attr))
        for col, attr in _NETWORK_BOOLS.items():
            v = n.attr(attr)
            cols[col].append(None if v is None else v.lower() == "true")
        for col, child in _NETWORK_TEXT.items():
            cols[col].append(n.child_text(child))
        cols["tracked_games_count"].append(n.child_text("TrackedGamesCount"))
        skins_node = n.one("Skins")
        skins = [
            {"id": s.attr("id"), "name": s.attr("name"), "major": (s.attr("major") or "").lower() == "true"}
            for s in (skins_node.all("Skin") if skins_node else [])
        ]
        cols["skins"].append(skins)
        cols["skin_count"].append(len(skins))
        extra: dict[str, str] = {}
        raw = n.raw if type(n.raw) is dict else {}
        for key, value in raw.items():
            if key in _NETWORK_KNOWN:
                continue
            if key[:1] == "@":
                check_value(value, f"{n.path}/{element_path([key])}")
            t = C.text(value)
            if t is not None:
                extra[key.lstrip("@")] = t
        cols["extra"].append(extra)
    schema = SCHEMAS["networks"]
    arrays: dict[str, Any] = dict(cols)
    arrays["tracked_games_count"] = C.int_array(cols["tracked_games_count"], column="networks.tracked_games_count")
    arrays["skins"] = pa.array(cols["skins"], schema.field("skins").type)
    arrays["extra"] = C.map_array(cols["extra"])
    return _table("networks", arrays, len(rows), night)


def _regions(payload: Node, night: date) -> pa.Table:
    node = payload.one("Regions")
    rows = node.all("Region") if node else []
    cols = {
        "code": [r.attr("code") for r in rows],
        "name": [r.attr("name") for r in rows],
        "image": [r.attr("image") for r in rows],
    }
    return _table("regions", cols, len(rows), night)


def _filters(payload: Node, night: date) -> tuple[pa.Table, pa.Table]:
    node = payload.one("FilterDefinition")
    constraints = node.all("ConstraintDefinition") if node else []
    c_cols: dict[str, list[Any]] = {"constraint_id": [], "type": [], "option_count": []}
    o_cols: dict[str, list[Any]] = {k: [] for k in ("constraint_id", "option_id", "name", "type", "description", "children")}
    for c in constraints:
        cid = c.attr("id")
        options = c.all("Option")
        c_cols["constraint_id"].append(cid)
        c_cols["type"].append(c.attr("type"))
        c_cols["option_count"].append(len(options))
        for o in options:
            o_cols["constraint_id"].append(cid)
            o_cols["option_id"].append(o.attr("id"))
            o_cols["name"].append(o.attr("name"))
            o_cols["type"].append(o.attr("type"))
            o_cols["description"].append(o.attr("description"))
            children = o.attr("children")
            o_cols["children"].append([x.strip() for x in children.split(",") if x.strip()] if children else [])
    return (
        _table("filter_constraints", c_cols, len(constraints), night),
        _table("filter_options", o_cols, len(o_cols["option_id"]), night),
    )


_DEFINITION_GROUPS = (
    ("player", "PlayerStatisticsDefinitions", "PlayerStatisticDefinition", "PlayerStatisticalDataSetDefinition"),
    ("tournament", "TournamentStatisticsDefinitions", "TournamentStatisticDefinition", "TournamentStatisticalDataSetDefinition"),
)


def _definitions(payload: Node, night: date) -> tuple[pa.Table, pa.Table]:
    s_cols: dict[str, list[Any]] = {k: [] for k in ("scope", "statistic_id", "name", "type", "description")}
    d_cols: dict[str, list[Any]] = {
        k: []
        for k in (
            "scope",
            "dataset",
            "x_axis_title",
            "x_axis_type",
            "z_axis_title",
            "z_axis_type",
            "series",
            "series_title",
            "type",
        )
    }
    for scope, group_name, stat_name, set_name in _DEFINITION_GROUPS:
        group = payload.one(group_name)
        if group is None:
            continue
        for d in group.all(stat_name):
            s_cols["scope"].append(scope)
            s_cols["statistic_id"].append(d.attr("id"))
            s_cols["name"].append(d.attr("name"))
            s_cols["type"].append(d.attr("type"))
            s_cols["description"].append(d.attr("description"))
        for ds in group.all(set_name):
            for s in ds.all("Series"):
                d_cols["scope"].append(scope)
                d_cols["dataset"].append(ds.attr("id"))
                d_cols["x_axis_title"].append(ds.attr("xAxisTitle"))
                d_cols["x_axis_type"].append(ds.attr("xAxisType"))
                d_cols["z_axis_title"].append(ds.attr("zAxisTitle"))
                d_cols["z_axis_type"].append(ds.attr("zAxisType"))
                d_cols["series"].append(s.attr("id"))
                d_cols["series_title"].append(s.attr("title"))
                d_cols["type"].append(s.attr("type"))
    return (
        _table("statistic_definitions", s_cols, len(s_cols["scope"]), night),
        _table("dataset_definitions", d_cols, len(d_cols["scope"]), night),
    )


def normalize_metadata(response: Node, night: date | str) -> dict[str, pa.Table]:
    """A ``/metadata`` response → ``currencies``, ``networks``, ``regions``,
    ``filter_constraints``, ``filter_options``, ``statistic_definitions``, ``dataset_definitions``.
    """
    night = as_date(night)
    payload = metadata_payload(response)
    metadata_hash = response.attr("metadataHash") if response.name == "Response" else None
    constraints, options = _filters(payload, night)
    statistics, datasets = _definitions(payload, night)
    return {
        "currencies": _currencies(payload, night, metadata_hash),
        "networks": _networks(payload, night),
        "regions": _regions(payload, night),
        "filter_constraints": constraints,
        "filter_options": options,
        "statistic_definitions": statistics,
        "dataset_definitions": datasets,
    }


def statistic_types(source: Node | pa.Table, scope: str = "player") -> dict[str, str]:
    """Statistic id → type (Number, Currency, ...), from a metadata response or the
    ``statistic_definitions`` table."""
    if isinstance(source, pa.Table):
        rows = source.select(["scope", "statistic_id", "type"]).to_pylist()
        return {r["statistic_id"]: r["type"] for r in rows if r["scope"] == scope and r["statistic_id"] and r["type"]}
    payload = metadata_payload(source)
    group_name, stat_name = (
        ("PlayerStatisticsDefinitions", "PlayerStatisticDefinition")
        if scope == "player"
        else ("TournamentStatisticsDefinitions", "TournamentStatisticDefinition")
    )
    group = payload.one(group_name)
    return {sid: stype for d in (group.all(stat_name) if group else []) if (sid := d.attr("id")) and (stype := d.attr("type"))}


def axis_types(source: Node | pa.Table, scope: str = "player") -> dict[str, str]:
    """Data set id → its x axis type (``Timestamp``, ``Number``, ``String``...), from a metadata
    response or ``dataset_definitions``."""
    table = source if isinstance(source, pa.Table) else _definitions(metadata_payload(source), date(1970, 1, 1))[1]
    rows = table.select(["scope", "dataset", "x_axis_type"]).to_pylist()
    return {r["dataset"]: r["x_axis_type"] for r in rows if r["scope"] == scope and r["dataset"] and r["x_axis_type"]}


def series_types(source: Node | pa.Table, scope: str = "player") -> dict[tuple[str, str], str]:
    """(data set id, series id) → type, from a metadata response or ``dataset_definitions``."""
    if isinstance(source, pa.Table):
        table = source
    else:
        table = _definitions(metadata_payload(source), date(1970, 1, 1))[1]
    rows = table.select(["scope", "dataset", "series", "type"]).to_pylist()
    return {
        (r["dataset"], r["series"]): r["type"] for r in rows if r["scope"] == scope and r["dataset"] and r["series"] and r["type"]
    }
