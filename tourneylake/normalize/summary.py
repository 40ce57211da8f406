"""Player summaries → player and tournament tables, streaming.

:class:`SummaryNormalizer` is fed one response at a time (:meth:`~SummaryNormalizer.add`) and
hands back Arrow tables on :meth:`~SummaryNormalizer.flush`, which also clears the batch, so a
caller writing a lake part every N players keeps memory flat however long the watchlist.

Speed matters (a benchmark holds normalising to within 2x of merely parsing the payloads): the
loops below read the JSON-mapping dicts (``Node.raw``) directly and only *collect* served
strings into Python lists. Everything else happens once per column at flush time with Arrow's
vectorised kernels: string → number/time casts, USD division, flag computation, and columns
that are constant for a whole summary (network, player, filter, currency) are expanded from one
value per summary with a ``take``.

Shape (service-notes §2)::

    Response/PlayerResponse/PlayerView
      Filter
      Player @name @network @country @countryName @lastActivity
        Statistics @displayCurrency
          Statistic[] {@id, $, @authorized}
          StatisticalDataSet[] {@id, Data[] {@x, @z, Y[] {@id, $}}}
          Timeline/Event[] {@id, @category, @date, ...}
        RecentTournaments/Tournament[] {@id, @network, ..., TournamentEntry {@playerName, @position, @prize?, @multientries?}}

A repeatable child may come as a list, as a bare object (when alone) or as ``""`` (when empty):
:func:`_columns.items` reads all three.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date, datetime
from itertools import chain
from operator import methodcaller
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from tourneylake.normalize import _columns as C
from tourneylake.normalize.metadata import Rates
from tourneylake.normalize.schemas import SCHEMAS
from tourneylake.tree import Node

__all__ = ["SummaryNormalizer", "SUMMARY_TABLES"]

SUMMARY_TABLES = (
    "player_snapshots",
    "player_statistics",
    "player_datasets",
    "player_timeline",
    "tournaments",
    "tournament_entries",
)

_DS_TYPES = (pa.string(), pa.int64(), pa.string(), pa.string(), pa.int64(), pa.string(), pa.string())
_DICT = frozenset({dict})
_LIST = frozenset({list})
_get_y = methodcaller("get", "Y")
_get_x = methodcaller("get", "@x")
_get_z = methodcaller("get", "@z")
_get_id = methodcaller("get", "@id")
_get_text = methodcaller("get", "$")
_F64 = pa.float64()
_STR = pa.string()
_I32 = pa.int32()

# Tournament attributes with a column of their own; the rest go to `extra`.
_TOURNAMENT_ATTRS = frozenset(
    "@" + a
    for a in (
        "id network name date duration currency stake rake prizePool guarantee overlay reEntries "
        "totalEntrants playersPerTable game gameClass structure flags state"
    ).split()
)
_EVENT_COLUMNS = {
    "event_id": "@id",
    "category": "@category",
    "event_at": "@date",
    "code": "@code",
    "name": "@name",
    "description": "@description",
    "points": "@points",
    "priority": "@priority",
    "is_negative": "@isNegative",
    "game_id": "@gameID",
    "tournament_name": "@tournamentName",
    "position": "@position",
    "entrants": "@entrants",
    "currency": "@currency",
    "prize": "@prize",
    "url": "@url",
}


def _first(value: Any) -> dict[str, Any] | None:
    """The first element child as a dict (a lone element is a bare object, several a list)."""
    if type(value) is list:
        value = value[0] if value else None
    return value if type(value) is dict else None


def _s(value: Any) -> str | None:
    """A served attribute as a string; ``""`` counts as absent."""
    if value is None or value == "":
        return None
    return value if type(value) is str else C.text(value)


_SetColumns = tuple[list[Any], list[Any], list[Any], list[Any], list[int]]


def _read_set_fast(datas: list[Any]) -> _SetColumns:
    series: list[Any] = []
    values: list[Any] = []
    xs: list[Any] = []
    zs: list[Any] = []
    runs: list[int] = []
    add_series, add_value = series.append, values.append
    for d in datas:
        ys = d["Y"]
        if type(ys) is not list:
            raise TypeError("lone Y")
        for y in ys:
            add_series(y["@id"])
            add_value(y["$"])
        xs.append(d.get("@x"))
        zs.append(d.get("@z"))
        runs.append(len(ys))
    return series, values, xs, zs, runs


def _read_set_tolerant(datas: list[Any]) -> _SetColumns:
    series: list[Any] = []
    values: list[Any] = []
    xs: list[Any] = []
    zs: list[Any] = []
    runs: list[int] = []
    for d in datas:
        if type(d) is not dict:
            continue
        ys = [y for y in C.items(d.get("Y")) if type(y) is dict]
        series.extend(y.get("@id") for y in ys)
        values.extend(y.get("$") for y in ys)
        xs.append(d.get("@x"))
        zs.append(d.get("@z"))
        runs.append(len(ys))
    return series, values, xs, zs, runs


class SummaryNormalizer:
    """Collects player summaries of one night; :meth:`flush` returns the Arrow tables.

    ``statistic_types`` maps statistic ids to metadata types (``metadata.statistic_types``);
    ``series_types`` maps (data set, series) to types (``metadata.series_types``) so Currency
    series get a USD value too. Tournaments and entries are deduplicated across every flush of
    this normaliser (several watched players share tournaments; a player may be harvested with
    several filters), so the parts of one night never repeat a key.
    """

    def __init__(
        self,
        snapshot_date: date | str,
        rates: Rates,
        statistic_types: Mapping[str, str],
        series_types: Mapping[tuple[str, str], str] | None = None,
    ) -> None:
        self.snapshot_date = C.as_date(snapshot_date)
        self.rates = rates
        self.statistic_types = dict(statistic_types)
        self.series_types = dict(series_types or {})
        # (data set, series) types as two aligned arrays for a vectorised lookup at flush
        self._series_keys = pa.array([f"{d}\x1f{s}" for d, s in self.series_types], _STR)
        names = sorted(set(self.series_types.values()))
        self._series_type_names = pa.array(names, _STR)
        self._series_key_codes = pa.array([names.index(t) for t in self.series_types.values()], _I32)
        self._seen_tournaments: set[tuple[str, str]] = set()
        self._seen_entries: set[tuple[str, str, str]] = set()
        self._reset()

    # ------------------------------------------------------------------ batch state
    def _reset(self) -> None:
        # one entry per summary (player_snapshots, and run values for the long tables)
        self._snap: dict[str, list[Any]] = {
            k: []
            for k in (
                "network player filter_name filter_expression served_filter served_name found country "
                "country_name last_activity_at display_currency display_usd_rate statistic_count "
                "tournament_count server_time metadata_hash fetched_at"
            ).split()
        }
        self._stat_runs: list[int] = []
        self._set_runs: list[int] = []
        self._event_runs: list[int] = []
        # player_statistics rows
        self._st_id: list[Any] = []
        self._st_type: list[str | None] = []
        self._st_value: list[Any] = []
        self._st_auth: list[bool] = []
        # player_datasets rows
        # player_datasets: one Arrow chunk per summary for each of (data set ids, their row
        # counts, x, z, data point row counts, series, value). Converting each summary's ~1,600
        # values at once keeps millions of small Python strings from piling up until flush
        # (they made the cyclic GC, not the parsing, the dominant cost).
        self._ds_chunks: list[list[pa.Array]] = [[] for _ in range(7)]
        # player_timeline rows
        self._ev: dict[str, list[Any]] = {k: [] for k in _EVENT_COLUMNS}
        self._ev_raw: list[dict[str, Any]] = []
        # tournaments rows
        self._t: dict[str, list[Any]] = {
            k: []
            for k in (
                "network tournament_id name started_at duration_s currency stake rake prize_pool guarantee "
                "overlay re_entries total_entrants players_per_table game game_class structure flags state extra"
            ).split()
        }
        # tournament_entries rows
        self._e: dict[str, list[Any]] = {
            k: [] for k in "network tournament_id player position prize multientries currency stake rake".split()
        }

    @property
    def pending(self) -> int:
        """Summaries added since the last flush."""
        return len(self._snap["player"])

    # ------------------------------------------------------------------ add
    def add(
        self,
        response: Node,
        *,
        network: str,
        player: str,
        filter_name: str | None = None,
        filter_expression: str | None = None,
        fetched_at: datetime | int | None = None,
    ) -> None:
        """Append one player-summary response (the ``Response`` root, success only)."""
        root = response.raw if type(response.raw) is dict else {}
        if response.name != "Response":
            raise ValueError(f"expected the Response root, got {response.name!r}")
        if str(root.get("@success", "true")).lower() == "false":
            raise ValueError("an error response is not a player summary (normalise only successful calls)")
        payload = _first(root.get("PlayerResponse"))
        view = _first(payload.get("PlayerView")) if payload else None
        p = _first(view.get("Player")) if view else None
        stats = _first(p.get("Statistics")) if p else None
        currency = _s(stats.get("@displayCurrency")) if stats else None
        filter_name = filter_name or ""

        snap = self._snap
        snap["network"].append(network)
        snap["player"].append(player)
        snap["filter_name"].append(filter_name)
        snap["filter_expression"].append(filter_expression or "")
        snap["served_filter"].append(_s(view.get("Filter")) if view else None)
        snap["found"].append(p is not None)
        snap["served_name"].append(_s(p.get("@name")) if p else None)
        snap["country"].append(_s(p.get("@country")) if p else None)
        snap["country_name"].append(_s(p.get("@countryName")) if p else None)
        snap["last_activity_at"].append(_s(p.get("@lastActivity")) if p else None)
        snap["display_currency"].append(currency)
        snap["display_usd_rate"].append(self.rates.rate(currency))
        snap["server_time"].append(_s(root.get("@timestamp")))
        snap["metadata_hash"].append(_s(root.get("@metadataHash")))
        snap["fetched_at"].append(C.epoch_seconds(fetched_at))

        n_stats = n_sets = n_events = 0
        if stats is not None:
            n_stats = self._add_statistics(stats)
            n_sets = self._add_datasets(stats)
            n_events = self._add_timeline(stats)
        snap["statistic_count"].append(n_stats)
        self._stat_runs.append(n_stats)
        self._set_runs.append(n_sets)
        self._event_runs.append(n_events)

        recent = _first(p.get("RecentTournaments")) if p else None
        n_tournaments = self._add_tournaments(recent, network, player) if recent else 0
        snap["tournament_count"].append(n_tournaments)

    def _add_statistics(self, stats: dict[str, Any]) -> int:
        types = self.statistic_types
        ids, typ, values, auth = self._st_id, self._st_type, self._st_value, self._st_auth
        n = 0
        for s in C.items(stats.get("Statistic")):
            if type(s) is not dict:
                continue
            sid = s.get("@id")
            ids.append(sid)
            typ.append(types.get(sid))
            value = s.get("$")
            values.append(None if value == "" else value)
            a = s.get("@authorized")
            auth.append(a is None or str(a).lower() != "false")
            n += 1
        return n

    def _add_datasets(self, stats: dict[str, Any]) -> int:
        # The hottest loop: a summary holds ~650 data points and ~1,600 values. Per value only
        # the series id and the value are collected; data set id / x / z once per set or point
        # with a repeat count; types are looked up vectorised at flush. The fast path indexes the
        # JSON lists directly (plain loops beat map/methodcaller on 3.11); a set with any odd
        # shape (a lone Y as a bare object in XML, a Y without a value, ...) is re-read with the
        # tolerant path, with the same result.
        ids: list[Any] = []
        id_runs: list[int] = []
        xs: list[Any] = []
        zs: list[Any] = []
        point_runs: list[int] = []
        series: list[Any] = []
        values: list[Any] = []
        for ds in C.items(stats.get("StatisticalDataSet")):
            if type(ds) is not dict:
                continue
            datas = C.items(ds.get("Data"))
            try:
                part = _read_set_fast(datas)
            except (KeyError, TypeError, AttributeError):
                part = _read_set_tolerant(datas)
            p_series, p_values, p_xs, p_zs, p_runs = part
            if p_series:
                series += p_series
                values += p_values
                xs += p_xs
                zs += p_zs
                point_runs += p_runs
                ids.append(ds.get("@id"))
                id_runs.append(len(p_series))
        n = len(series)
        if n:
            for chunks, column, dtype in zip(
                self._ds_chunks, (ids, id_runs, xs, zs, point_runs, series, values), _DS_TYPES, strict=True
            ):
                chunks.append(C.str_array(column) if dtype == _STR else pa.array(column, dtype))
        return n

    def _add_timeline(self, stats: dict[str, Any]) -> int:
        timeline = _first(stats.get("Timeline"))
        if timeline is None:
            return 0
        cols = [(self._ev[col], key) for col, key in _EVENT_COLUMNS.items()]
        raws = self._ev_raw
        n = 0
        for e in C.items(timeline.get("Event")):
            if type(e) is not dict:
                continue
            for out, key in cols:
                out.append(e.get(key))
            raws.append(e)  # the attributes map is built at flush
            n += 1
        return n

    def _add_tournaments(self, recent: dict[str, Any], network: str, player: str) -> int:
        t_cols, e_cols = self._t, self._e
        seen_t, seen_e = self._seen_tournaments, self._seen_entries
        folded = player.casefold()
        n = 0
        for t in C.items(recent.get("Tournament")):
            if type(t) is not dict:
                continue
            n += 1
            tid = _s(t.get("@id"))
            if tid is None:
                continue  # no key: nothing to attach it to
            net = _s(t.get("@network")) or network
            currency = _s(t.get("@currency"))
            stake, rake = t.get("@stake"), t.get("@rake")
            key = (net, tid)
            if key not in seen_t:
                seen_t.add(key)
                t_cols["network"].append(net)
                t_cols["tournament_id"].append(tid)
                t_cols["name"].append(t.get("@name"))
                t_cols["started_at"].append(t.get("@date"))
                t_cols["duration_s"].append(t.get("@duration"))
                t_cols["currency"].append(currency)
                t_cols["stake"].append(stake)
                t_cols["rake"].append(rake)
                t_cols["prize_pool"].append(t.get("@prizePool"))
                t_cols["guarantee"].append(t.get("@guarantee"))
                t_cols["overlay"].append(t.get("@overlay"))
                t_cols["re_entries"].append(t.get("@reEntries"))
                t_cols["total_entrants"].append(t.get("@totalEntrants"))
                t_cols["players_per_table"].append(t.get("@playersPerTable"))
                t_cols["game"].append(t.get("@game"))
                t_cols["game_class"].append(t.get("@gameClass"))
                t_cols["structure"].append(t.get("@structure"))
                flags = _s(t.get("@flags"))
                t_cols["flags"].append([f for f in flags.split(",") if f] if flags else [])
                t_cols["state"].append(t.get("@state"))
                t_cols["extra"].append(
                    {k[1:]: C.text(v) for k, v in sorted(t.items()) if k[:1] == "@" and k not in _TOURNAMENT_ATTRS}
                )
            for e in C.items(t.get("TournamentEntry")):
                if type(e) is not dict:
                    continue
                served = _s(e.get("@playerName"))
                who = player if served is None or served.casefold() == folded else served
                ekey = (net, tid, who)
                if ekey in seen_e:
                    continue
                seen_e.add(ekey)
                e_cols["network"].append(net)
                e_cols["tournament_id"].append(tid)
                e_cols["player"].append(who)
                e_cols["position"].append(e.get("@position"))
                e_cols["prize"].append(e.get("@prize"))
                e_cols["multientries"].append(e.get("@multientries"))
                e_cols["currency"].append(currency)
                e_cols["stake"].append(stake)
                e_cols["rake"].append(rake)
        return n

    # ------------------------------------------------------------------ flush
    def flush(self) -> dict[str, pa.Table]:
        """The tables of every summary added since the last flush; clears the batch."""
        try:
            return {
                "player_snapshots": self._snapshots_table(),
                "player_statistics": self._statistics_table(),
                "player_datasets": self._datasets_table(),
                "player_timeline": self._timeline_table(),
                "tournaments": self._tournaments_table(),
                "tournament_entries": self._entries_table(),
            }
        finally:
            self._reset()

    def _date_col(self, n: int) -> pa.Array:
        return C.repeat(self.snapshot_date, n, pa.date32())

    def _per_player(self, name: str, runs: list[int], dtype: pa.DataType = _STR) -> pa.Array:
        return C.runs(self._snap[name], runs, dtype)

    def _snapshots_table(self) -> pa.Table:
        s = self._snap
        n = len(s["player"])
        schema = SCHEMAS["player_snapshots"]
        cols = {
            "snapshot_date": self._date_col(n),
            "network": C.str_array(s["network"]),
            "player": C.str_array(s["player"]),
            "filter_name": C.str_array(s["filter_name"]),
            "filter_expression": C.str_array(s["filter_expression"]),
            "served_filter": C.str_array(s["served_filter"]),
            "served_name": C.str_array(s["served_name"]),
            "found": pa.array(s["found"], pa.bool_()),
            "country": C.str_array(s["country"]),
            "country_name": C.str_array(s["country_name"]),
            "last_activity_at": C.time_array(s["last_activity_at"]),
            "display_currency": C.str_array(s["display_currency"]),
            "display_usd_rate": pa.array(s["display_usd_rate"], _F64),
            "statistic_count": pa.array(s["statistic_count"], _I32),
            "tournament_count": pa.array(s["tournament_count"], _I32),
            "server_time": C.time_array(s["server_time"]),
            "metadata_hash": C.str_array(s["metadata_hash"]),
            "fetched_at": pa.array(s["fetched_at"], pa.int64()).cast(schema.field("fetched_at").type),
        }
        return pa.Table.from_arrays([cols[f.name] for f in schema], schema=schema)

    def _long_keys(self, runs: list[int]) -> dict[str, pa.Array]:
        # Constant for a whole summary: dictionary-encoded from one value per summary, so a
        # batch of a million rows costs an int32 repeat, not a million string copies.
        n = sum(runs)
        snap = self._snap
        return {
            "snapshot_date": self._date_col(n),
            "network": C.dict_runs(snap["network"], runs),
            "player": C.dict_runs(snap["player"], runs),
            "filter_name": C.dict_runs(snap["filter_name"], runs),
            "display_currency": C.dict_runs(snap["display_currency"], runs),
            "_rate": self._per_player("display_usd_rate", runs, _F64),
        }

    @staticmethod
    def _typed_values(typ: pa.Array, values: pa.Array, rate: pa.Array) -> dict[str, pa.Array]:
        number = C.float_array(values)
        is_string = pc.fill_null(pc.equal(typ, "String"), False)
        number = pc.if_else(is_string, pa.scalar(None, _F64), number)
        is_money = pc.fill_null(pc.equal(typ, "Currency"), False)
        money = pc.if_else(is_money, number, pa.scalar(None, _F64))
        return {
            "value_number": number,
            "value_usd": C.usd(money, rate),
            "usd_rate_missing": C.rate_missing([money], rate),
            "_is_time": pc.fill_null(pc.equal(typ, "Timestamp"), False),
        }

    def _statistics_table(self) -> pa.Table:
        keys = self._long_keys(self._stat_runs)
        typ = pa.array(self._st_type, _STR).dictionary_encode()
        values = C.str_array(self._st_value)
        typed = self._typed_values(typ, values, keys["_rate"])
        schema = SCHEMAS["player_statistics"]
        time_values = pc.if_else(typed["_is_time"], values, pa.scalar(None, _STR))
        cols = {
            **keys,
            **typed,
            "statistic": C.str_array(self._st_id),
            "type": typ,
            "value": values,
            "value_time": C.time_array(time_values),
            "authorized": pa.array(self._st_auth, pa.bool_()),
        }
        return pa.Table.from_arrays([cols[f.name] for f in schema], schema=schema)

    def _datasets_table(self) -> pa.Table:
        keys = self._long_keys(self._set_runs)
        ids, id_runs, xs, zs, point_runs, series, values = (
            pa.concat_arrays(chunks) if chunks else pa.array([], dtype)
            for chunks, dtype in zip(self._ds_chunks, _DS_TYPES, strict=True)
        )
        dataset = C.dict_runs(ids.to_pylist(), id_runs)
        lookup = pc.binary_join_element_wise(dataset.cast(_STR), series, "\x1f")
        typ = pa.DictionaryArray.from_arrays(
            self._series_key_codes.take(pc.index_in(lookup, value_set=self._series_keys)), self._series_type_names
        )
        typed = self._typed_values(typ, values, keys["_rate"])
        schema = SCHEMAS["player_datasets"]
        cols = {
            **keys,
            **typed,
            "dataset": dataset,
            "x": C.runs(xs, point_runs, _STR),
            "z": C.runs(zs, point_runs, _STR),
            "series": series,
            "type": typ,
            "value": values,
        }
        return pa.Table.from_arrays([cols[f.name] for f in schema], schema=schema)

    def _timeline_table(self) -> pa.Table:
        runs = self._event_runs
        n = sum(runs)
        ev = self._ev
        schema = SCHEMAS["player_timeline"]
        currency = C.str_array(ev["currency"])
        prize = C.float_array(ev["prize"])
        rate = pa.array([self.rates.rate(c) for c in currency.to_pylist()], _F64)
        prize_usd = C.usd(prize, rate)
        cols = {
            "snapshot_date": self._date_col(n),
            "network": self._per_player("network", runs),
            "player": self._per_player("player", runs),
            "filter_name": self._per_player("filter_name", runs),
            "event_id": C.str_array(ev["event_id"]),
            "category": C.str_array(ev["category"]),
            "event_at": C.time_array(ev["event_at"]),
            "code": C.str_array(ev["code"]),
            "name": C.str_array(ev["name"]),
            "description": C.str_array(ev["description"]),
            "points": C.int_array(ev["points"], _I32),
            "priority": C.int_array(ev["priority"], _I32),
            "is_negative": C.bool_array(ev["is_negative"]),
            "game_id": C.str_array(ev["game_id"]),
            "tournament_name": C.str_array(ev["tournament_name"]),
            "position": C.int_array(ev["position"], _I32),
            "entrants": C.int_array(ev["entrants"], _I32),
            "currency": currency,
            "prize": prize,
            "prize_usd": prize_usd,
            "usd_rate_missing": C.rate_missing([prize], rate),
            "url": C.str_array(ev["url"]),
            "attributes": C.map_array([C.attributes(e) for e in self._ev_raw]),
        }
        return pa.Table.from_arrays([cols[f.name] for f in schema], schema=schema)

    def _rate_col(self, currencies: list[Any]) -> pa.Array:
        rate = self.rates.rate
        return pa.array([rate(c) for c in currencies], _F64)

    def _tournaments_table(self) -> pa.Table:
        t = self._t
        n = len(t["tournament_id"])
        schema = SCHEMAS["tournaments"]
        rate = self._rate_col(t["currency"])
        money = {k: C.float_array(t[k]) for k in ("stake", "rake", "prize_pool", "guarantee", "overlay")}
        buy_in = pc.add(money["stake"], money["rake"])
        cols: dict[str, pa.Array] = {
            "snapshot_date": self._date_col(n),
            "network": C.str_array(t["network"]),
            "tournament_id": C.str_array(t["tournament_id"]),
            "name": C.str_array(t["name"]),
            "started_at": C.time_array(t["started_at"]),
            "duration_s": C.int_array(t["duration_s"]),
            "currency": C.str_array(t["currency"]),
            "buy_in": buy_in,
            "buy_in_usd": C.usd(buy_in, rate),
            "re_entries": C.int_array(t["re_entries"], _I32),
            "total_entrants": C.int_array(t["total_entrants"], _I32),
            "players_per_table": C.int_array(t["players_per_table"], _I32),
            "game": C.str_array(t["game"]),
            "game_class": C.str_array(t["game_class"]),
            "structure": C.str_array(t["structure"]),
            "flags": pa.array(t["flags"], schema.field("flags").type),
            "state": C.str_array(t["state"]),
            "usd_rate": rate,
            "usd_rate_missing": C.rate_missing(money.values(), rate),
            "extra": C.map_array(t["extra"]),
        }
        for k, amount in money.items():
            cols[k] = amount
            cols[k + "_usd"] = C.usd(amount, rate)
        return pa.Table.from_arrays([cols[f.name] for f in schema], schema=schema)

    def _entries_table(self) -> pa.Table:
        e = self._e
        n = len(e["tournament_id"])
        schema = SCHEMAS["tournament_entries"]
        rate = self._rate_col(e["currency"])
        prize = C.float_array(e["prize"])
        stake = C.float_array(e["stake"])
        rake = C.float_array(e["rake"])
        # A player who did not cash has no @prize: their result is −(stake + rake).
        profit = pc.subtract(pc.subtract(prize.fill_null(0.0), stake), rake)
        cols = {
            "snapshot_date": self._date_col(n),
            "network": C.str_array(e["network"]),
            "tournament_id": C.str_array(e["tournament_id"]),
            "player": C.str_array(e["player"]),
            "position": C.int_array(e["position"], _I32),
            "cashed": pc.fill_null(pc.greater(prize, 0.0), False),
            "prize": prize,
            "prize_usd": C.usd(prize, rate),
            "multientries": C.int_array(e["multientries"], _I32),
            "currency": C.str_array(e["currency"]),
            "stake": stake,
            "rake": rake,
            "profit": profit,
            "profit_usd": C.usd(profit, rate),
            "usd_rate": rate,
            "usd_rate_missing": C.rate_missing([prize, stake, rake, profit], rate),
        }
        return pa.Table.from_arrays([cols[f.name] for f in schema], schema=schema)
