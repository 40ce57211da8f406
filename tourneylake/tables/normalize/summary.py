"""Player summaries → player and tournament tables, streaming.

:class:`SummaryNormalizer` is fed one response at a time (:meth:`~SummaryNormalizer.add`) and
hands back Arrow tables on :meth:`~SummaryNormalizer.flush`, which clears the batch, so a caller
writing a part every N players keeps memory flat. Two ways to read a summary give the same
tables, warnings and errors: the fast path (typed structs, :mod:`._fast`) for the clean shape,
the tree path for anything else. Values are kept as one list per column and converted at flush,
once per column, with Arrow's kernels (casts, USD by a rate column, flags, per-summary constants
expanded with ``take``); the night's dedup keys are compact hashes (:mod:`._seen`).
:meth:`~SummaryNormalizer.add` checks a payload before it keeps anything and raises only
:class:`~tourneylake.api.tree.MalformedPayload`, leaving the batch as it was; a value out of
range is NULL at flush, with a warning. The shape (``docs/concepts/service.md``) is
``Response/PlayerResponse/PlayerView/{Filter, Player/{Statistics/{Statistic, StatisticalDataSet,
Timeline/Event}, RecentTournaments/Tournament/TournamentEntry}}``; a repeatable child may be a
list, a bare object or ``""``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from itertools import chain
from operator import attrgetter, methodcaller
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tourneylake.api.tree import MalformedPayload, Node, check_value, element_path
from tourneylake.lake.raw import as_date
from tourneylake.schemas import SCHEMAS, STR_MAP
from tourneylake.tables.normalize import _columns as C
from tourneylake.tables.normalize import _fast as F
from tourneylake.tables.normalize._seen import SeenKeys
from tourneylake.tables.normalize.metadata import Rates

__all__ = ["SUMMARY_TABLES", "SummaryNormalizer"]

SUMMARY_TABLES = (
    "player_snapshots",
    "player_statistics",
    "player_datasets",
    "player_timeline",
    "tournaments",
    "tournament_entries",
)

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
_I64 = pa.int64()

# Tournament attributes with a column of their own; the rest go to `extra`.
_TOURNAMENT_ATTRS = frozenset("@" + a for a in F.TOURNAMENT_ATTRS)  # one list, shared with the fast path
_TOURNAMENT_KEYS = _TOURNAMENT_ATTRS | {"TournamentEntry"}
_NO_EXTRA: dict[str, str | None] = {}
_CONVERT_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError, TypeError, ValueError)
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
_EV_STRUCT = pa.struct([(a, pa.string()) for a in _EVENT_COLUMNS.values()])

# The attributes each long table reads, by their served names (a tournament's @id and @network
# are its key, read with it: `_Tournaments.keys`).
_T_COLS = tuple(sorted(_TOURNAMENT_ATTRS - {"@id", "@network"}))
_E_COLS = ("@position", "@prize", "@multientries")
_ET_COLS = ("@currency", "@stake", "@rake")
_ST_COLS = ("@id", "$", "@authorized")


def _from_dicts(names: tuple[str, ...]) -> Callable[[list[dict[str, Any]]], list[list[Any]]]:
    """A reader of the columns ``names`` of raw dicts (the tree path), one list each."""

    def columns(raws: list[dict[str, Any]]) -> list[list[Any]]:
        return [[raw.get(name) for raw in raws] for name in names]

    return columns


# How the columns are read, from raw dicts (tree path, index 0) or structs (fast path, index 1:
# `_fast` names the fields without the "@"): a comprehension a column, faster on 3.11 than a
# getter mapped over the elements. A tournament's attributes come in one call
# (``msgspec.structs.astuple``) and its columns with one ``zip``.
_T_FROM_DICTS = _from_dicts(_T_COLS)
_T_FIELDS = [f.name for f in msgspec.structs.fields(F.Tournament)]
_T_FIELD_INDEX = tuple(_T_FIELDS.index(n[1:]) for n in _T_COLS)
_astuple = msgspec.structs.astuple
_E_FROM = (  # in _E_COLS' order, and _ET_FROM in _ET_COLS'
    _from_dicts(_E_COLS),
    lambda es: ([e.position for e in es], [e.prize for e in es], [e.multientries for e in es]),
)
_ET_FROM = (
    _from_dicts(_ET_COLS),
    lambda ts: ([t.currency for t in ts], [t.stake for t in ts], [t.rake for t in ts]),
)
_ST_FROM_DICTS = _from_dicts(_ST_COLS)
_NO_STATISTICS: Sequence[Sequence[Any]] = ((), (), ())
#: A snapshot's columns, as the catalogue declares them (``snapshot_date`` is the partition).
_SNAPSHOT_KEYS = tuple(name for name in SCHEMAS["player_snapshots"].names if name != "snapshot_date")


def _first(value: Any) -> dict[str, Any] | None:
    """The first element child as a dict (a lone element is a bare object, several a list)."""
    if type(value) is list:
        value = value[0] if value else None
    return value if type(value) is dict else None


def _s(value: Any) -> str | None:
    """A served attribute as a string; ``""`` counts as absent. At flush only: by then
    :meth:`SummaryNormalizer.add` has checked that every kept attribute is a value."""
    if value is None or value == "":
        return None
    return value if type(value) is str else C.text(value)


# Element paths named in the messages of MalformedPayload.
_P_VIEW = "Response/PlayerResponse/PlayerView"
_P_PLAYER = _P_VIEW + "/Player"
_P_STATS = _P_PLAYER + "/Statistics"
_P_SET = _P_STATS + "/StatisticalDataSet"
_P_TOURNAMENT = _P_PLAYER + "/RecentTournaments/Tournament"
_CONTAINERS = frozenset({dict, list})


def _value(value: Any, where: str) -> str | None:
    """A served attribute as a string (``""`` is absent); an object or a list is garbage."""
    if value is None or value == "":
        return None
    if type(value) is str:
        return value
    check_value(value, where)
    return C.text(value)


def _element_text(value: Any, where: str) -> str | None:
    """A text element's text: ``"x"``, or ``{"@a": ..., "$": "x"}`` when it has attributes."""
    if type(value) is list:
        value = value[0] if value else None
    if type(value) is dict:
        return _value(value.get("$"), where + "/$")
    return _value(value, where)


def _check_values(raws: list[dict[str, Any]], where: str) -> None:
    """Every attribute and text of these raw elements is a value. One pass over the types in C
    first (a summary keeps ~350 of them); the element and attribute are looked for only when
    an object or a list is among them (it may still be a child element, which is allowed)."""
    if _CONTAINERS.isdisjoint(map(type, chain.from_iterable(map(dict.values, raws)))):  # type: ignore[arg-type]  # map(type, …)
        return
    for index, raw in enumerate(raws):
        _check_attributes(raw, f"{where}[{index}]")


def _check_attributes(raw: dict[str, Any], where: str) -> None:
    for key, value in raw.items():
        if (type(value) is dict or type(value) is list) and (key[:1] == "@" or key == "$"):
            check_value(value, f"{where}/{element_path([key])}")


def _entries(tournament: dict[str, Any]) -> list[Any]:
    entries = tournament.get("TournamentEntry")
    return [entries] if type(entries) is dict else C.items(entries)


def _check_tournaments(tournaments: list[Any]) -> None:
    """Every attribute of the tournaments and their entries is a value. As in `_check_values`
    one pass over the types in C first, where a tournament's one expected container is its
    TournamentEntry; the precise search (and the path) only when there is another."""
    kept = [t for t in tournaments if type(t) is dict]
    types = list(map(type, chain.from_iterable(map(dict.values, kept))))
    entries = [t.get("TournamentEntry") for t in kept]
    expected = sum(1 for e in entries if type(e) is dict or type(e) is list)
    flat = [e for t in kept for e in _entries(t) if type(e) is dict]
    if types.count(dict) + types.count(list) == expected and _CONTAINERS.isdisjoint(
        map(type, chain.from_iterable(map(dict.values, flat)))  # type: ignore[arg-type]  # map(type, …)
    ):
        return
    for index, t in enumerate(tournaments):
        if type(t) is dict:
            _check_attributes(t, f"{_P_TOURNAMENT}[{index}]")
            for e in _entries(t):
                if type(e) is dict:
                    _check_attributes(e, f"{_P_TOURNAMENT}[{index}]/TournamentEntry")


def _struct_fields(raws: list[dict[str, Any]], struct: pa.StructType) -> dict[str, Any]:
    """The attributes named by ``struct`` of every raw dict: one Arrow conversion (string
    fields), or, when some value is not a string, Python lists of the served values."""
    try:
        arr = pa.array(raws, struct)
        return {struct.field(i).name: arr.field(i) for i in range(struct.num_fields)}
    except _CONVERT_ERRORS:
        return {struct.field(i).name: [r.get(struct.field(i).name) for r in raws] for i in range(struct.num_fields)}


def _fields(columns: dict[str, list[Any]]) -> dict[str, Any]:
    """Served attribute columns as string arrays or, when some value in any of them is not a
    string, all as the Python lists (as `_struct_fields` does for one element kind)."""
    try:
        return {name: pa.array(values, _STR) for name, values in columns.items()}
    except _CONVERT_ERRORS:
        return dict(columns)


def _str(values: Any) -> pa.Array:
    return values if isinstance(values, pa.Array) else C.str_array(values)


def _blank_null(values: Any) -> pa.Array:
    """``_s`` on a column: ``""`` → NULL (non-strings via ``text``)."""
    if isinstance(values, pa.Array):
        return pc.if_else(pc.equal(values, ""), pa.scalar(None, _STR), values)
    return C.str_array([_s(v) for v in values])


def _flags(values: Any, dtype: pa.DataType) -> pa.Array:
    """``@flags`` split on commas, empty parts dropped; NULL / ``""`` → ``[]``."""
    if not isinstance(values, pa.Array):
        out = []
        for v in values:
            f = _s(v)
            out.append([x for x in f.split(",") if x] if f else [])
        return pa.array(out, dtype)
    split = pc.split_pattern(values.fill_null(""), ",")
    parts = split.flatten()
    keep = pc.not_equal(parts, "")
    lens = split.value_lengths().to_numpy(zero_copy_only=False)
    rows = np.repeat(np.arange(len(split), dtype=np.int64), lens)
    counts = np.bincount(rows[keep.to_numpy(zero_copy_only=False)], minlength=len(split))
    offsets = np.zeros(len(split) + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets), parts.filter(keep), type=dtype)


def _bools(values: Any) -> pa.Array:
    if not isinstance(values, pa.Array):
        return C.bool_array(values)
    lower = pc.utf8_lower(values)
    out = pc.equal(lower, "true")
    if pc.any(pc.and_(pc.match_substring(lower, "true"), pc.invert(out))).as_py():
        return C.bool_array(values.to_pylist())  # padded: Python's idea of whitespace decides
    return out


_SetColumns = tuple[list[Any], list[Any], list[Any], list[Any], list[int]]
# What one summary's reading gives `add`: served snapshot values, statistic columns, data set
# columns, timeline events, tournaments.
_Parts = tuple[dict[str, Any], Any, "_DataSets | None", list[dict[str, Any]], "_Tournaments"]


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


# The element path of each data set string column (see `_DataSets`), for messages.
_DS_PATHS = (
    _P_SET + "/@id",
    _P_SET + "/Data/@x",
    _P_SET + "/Data/@z",
    _P_SET + "/Data/Y/@id",
    _P_SET + "/Data/Y/$",
)


@dataclass(slots=True)
class _DataSets:
    """One summary's data sets: its string columns (data set ids, x, z, series, values) one
    after the other in one Arrow array, and the counts that cut it (``id_runs``: values per
    data set, ``point_runs``: values per data point)."""

    strings: pa.Array
    id_runs: list[int]
    point_runs: list[int]

    @property
    def values(self) -> int:
        return (len(self.strings) - len(self.id_runs) - 2 * len(self.point_runs)) // 2


def _ds_columns(
    ids: list[Any], id_runs: list[int], xs: list[Any], zs: list[Any], point_runs: list[int], series: list[Any], values: list[Any]
) -> _DataSets | None:
    """One summary's data set columns (strings checked to be values on the way: an object or a
    list among them is garbage), or ``None`` when it has no values. Converted now, while the
    summary's strings are still in the CPU's caches (at flush the same conversion costs more),
    in one Arrow call: a call's fixed cost is paid once a summary, not per column."""
    if not series:
        return None
    try:
        strings = pa.array(ids + xs + zs + series + values, _STR)
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # the first column with garbage names it
        columns = (ids, xs, zs, series, values)
        strings = pa.concat_arrays([_value_strings(c, w) for c, w in zip(columns, _DS_PATHS, strict=True)])
    return _DataSets(strings, id_runs, point_runs)


def _gather(strings: pa.Array, starts: np.ndarray, lens: np.ndarray) -> pa.Array:
    """The slices ``[starts[i], starts[i] + lens[i])`` of ``strings``, one after the other."""
    total = int(lens.sum())
    if not total:
        return pa.array([], _STR)
    shift = starts - (np.cumsum(lens) - lens)
    return strings.take(pa.array(np.repeat(shift, lens) + np.arange(total, dtype=np.int64)))


def _value_strings(values: list[Any], where: str) -> pa.Array:
    """Served values as a string column; an object or a list among them is garbage."""
    try:
        return pa.array(values, _STR)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        for value in values:
            check_value(value, where)
        return C.str_array(values)


_t_id = attrgetter("id")
_t_entry = attrgetter("TournamentEntry")
_e_name = attrgetter("player_name")
_ENTRY_ONLY = {F.Entry}


_E_ATTRS = ("@playerName", "@position", "@prize", "@multientries")  # `_fast.Entry`'s fields, in order
_T_KNOWN = tuple("@" + a for a in F.TOURNAMENT_ATTRS)


def _fast_tournament(t: Any) -> tuple[Any, ...]:
    """A tournament's values (its entries aside), as :func:`_tree_tournament` gives them."""
    return _astuple(t)[:-1], ()


def _fast_entry(e: Any) -> tuple[Any, ...]:
    return _astuple(e), ()


def _text(value: Any) -> str | None:
    return value if value is None or type(value) is str else str(value)


def _tree_values(element: dict[str, Any], known: tuple[str, ...]) -> tuple[Any, ...]:
    """An element's attributes: the known ones in order, then any other, sorted (both paths
    give one answer's element the same values, so a night keeps the same rows either way)."""
    others = tuple(sorted((k, _text(v)) for k, v in element.items() if k[:1] == "@" and k not in known))
    return tuple(_text(element.get(k)) for k in known), others


def _tree_tournament(t: dict[str, Any]) -> tuple[Any, ...]:
    return _tree_values(t, _T_KNOWN)


def _tree_entry(e: dict[str, Any]) -> tuple[Any, ...]:
    return _tree_values(e, _E_ATTRS)


def _new_keys(keys: list[Any], seen: SeenKeys, new: set[int]) -> list[int] | None:
    """Indexes of the keys that are new to the night (the first of each; their hashes added to
    ``new``), or ``None`` when all of them are (the usual case, without a Python loop)."""
    if not keys:
        return None
    hashes = list(map(hash, keys))
    unseen = seen.unseen_before(hashes)
    batch = seen.batch
    if all(unseen) and batch.isdisjoint(hashes):
        new.update(hashes)
        if len(new) == len(hashes):
            return None
        new.clear()  # a key repeats within the summary: the loop below keeps the first
    keep = []
    for index, (h, is_unseen) in enumerate(zip(hashes, unseen, strict=True)):
        if is_unseen and h not in batch and h not in new:
            new.add(h)
            keep.append(index)
    return keep


def _raw_statistics(root: dict[str, Any]) -> dict[str, Any]:
    """The Statistics element of a summary the fast path accepted, as a raw dict (the structs
    said it is there; the same steps as the tree path's)."""
    payload = _first(root.get("PlayerResponse"))
    view = _first(payload.get("PlayerView")) if payload else None
    p = _first(view.get("Player")) if view else None
    stats = _first(p.get("Statistics")) if p else None
    assert stats is not None
    return stats


def _empty_maps(n: int) -> pa.Array:
    """``C.map_array`` of ``n`` empty dicts."""
    offsets = pa.array(np.zeros(n + 1, dtype=np.int32))
    return pa.MapArray.from_arrays(offsets, pa.array([], _STR), pa.array([], _STR), type=STR_MAP)


@dataclass(slots=True)
class _Tournaments:
    """One summary's recent tournaments and entries, read and checked, not yet kept.

    ``raws`` / ``entry_raws`` / ``entry_tournaments`` are the kept elements: raw dicts (tree
    path) or structs (fast path, ``fast``); their columns are taken when the summary is kept.
    ``seen`` / ``seen_entries``: hashes of the keys new to the night (see `_seen`)."""

    count: int = 0
    fast: bool = False
    seen: set[int] = field(default_factory=set)
    seen_entries: set[int] = field(default_factory=set)
    keys: list[tuple[str, str]] = field(default_factory=list)
    raws: list[Any] = field(default_factory=list)
    extras: list[dict[str, str | None]] = field(default_factory=list)
    entry_keys: list[tuple[str, str, str]] = field(default_factory=list)
    entry_raws: list[Any] = field(default_factory=list)
    entry_tournaments: list[Any] = field(default_factory=list)
    # The kept rows' dedup hashes, in order, when the normaliser tracks them (see `track_hashes`)
    row_hashes: list[int] = field(default_factory=list)
    entry_row_hashes: list[int] = field(default_factory=list)


_NO_TOURNAMENTS = _Tournaments()  # never mutated: `add` only reads it


class SummaryNormalizer:
    """Collects player summaries of one night; :meth:`flush` returns the Arrow tables.

    ``statistic_types`` maps statistic ids to metadata types (``metadata.statistic_types``);
    ``series_types`` maps (data set, series) to types (``metadata.series_types``) so Currency
    series get a USD value too. Tournaments and entries are deduplicated across every flush of
    this normaliser (several watched players share tournaments; a player may be harvested with
    several filters) as they are listed: a key listed again at the same server time with the
    same values is dropped; listed otherwise, it is kept again, each row with its answer's
    ``listed_at``, and the night keeps one of them by content once every answer is in
    (``night_tables.keep_one_row_per_key``).

    Two ways to read a summary, with the same result: the fast path (``fast=True``, the
    default) converts the tree to typed structs in compiled code (:mod:`._fast`) and reads
    those; a summary whose shape the structs refuse is read the tree way, which also decides
    every error. :attr:`fast_reads` / :attr:`tree_reads` count the summaries read each way.
    """

    def __init__(
        self,
        night: date | str,
        rates: Rates,
        statistic_types: Mapping[str, str],
        series_types: Mapping[tuple[str, str], str] | None = None,
        axis_types: Mapping[str, str] | None = None,
        *,
        fast: bool = True,
    ) -> None:
        self.night = as_date(night)
        self.rates = rates
        self.statistic_types = dict(statistic_types)
        self.series_types = dict(series_types or {})
        self.axis_types = dict(axis_types or {})
        self.fast = fast
        self.fast_reads = 0
        self.tree_reads = 0
        # (data set, series) types for a vectorised lookup at flush: series names → codes, and
        # type codes per (data set, series code)
        names = sorted(set(self.series_types.values()))
        self._series_type_names = pa.array(names, _STR)
        self._type_code = {k: names.index(t) for k, t in self.series_types.items()}
        self._series_names = sorted({s for _, s in self.series_types})
        self._series_name_set = pa.array(self._series_names, _STR)
        # The night's keys, as 64-bit hashes (see `_seen`): 8 bytes a key, not a tuple.
        self._seen_tournaments = SeenKeys()
        self._seen_entries = SeenKeys()
        #: The deduplicated tables of which a key was kept twice tonight (two answers that list it
        #: otherwise): only these need the night's one-row-per-key pass. By the keys' hashes (as
        #: the night's dedup): a collision costs that pass, never a row.
        self.repeating: set[str] = set()
        self._kept_keys = {"tournaments": SeenKeys(), "tournament_entries": SeenKeys()}
        #: Per deduplicated table, the dedup hash and the key hash of each row of the last
        #: flush, when tracked (:meth:`track_hashes`), else ``None``.
        self.flushed_hashes: dict[str, tuple[np.ndarray, np.ndarray]] | None = None
        self._hashes: dict[str, tuple[list[int], list[int]]] | None = None
        self._reset()

    def track_hashes(self) -> None:
        """From now on, each flush also gives the dedup and key hashes of its tournaments and
        entries (:attr:`flushed_hashes`): another normaliser of the night, in a process forked
        from this one's (the same hashes), merges the rows with :meth:`without_kept`."""
        self._hashes = {"tournaments": ([], []), "tournament_entries": ([], [])}

    def without_kept(self, table: str, rows: pa.Table, row_hashes: np.ndarray, key_hashes: np.ndarray) -> pa.Table:
        """``rows`` of a deduplicated table that another normaliser of the night kept (with
        their hashes, see :meth:`track_hashes`), without those this one kept as listed; a key
        this one kept otherwise makes the table :attr:`repeating`, as if one normaliser had
        read every answer. Call it after :meth:`flush` (what this one kept is committed)."""
        seen = self._seen_tournaments if table == "tournaments" else self._seen_entries
        fresh = np.asarray(seen.unseen_before(row_hashes.tolist()), dtype=bool)
        if table not in self.repeating and not all(self._kept_keys[table].unseen_before(key_hashes[fresh].tolist())):
            self.repeating.add(table)
        return rows if fresh.all() else rows.filter(pa.array(fresh))

    # ------------------------------------------------------------------ batch state
    def _reset(self) -> None:
        # one entry per summary (player_snapshots, and run values for the long tables)
        self._snap: dict[str, list[Any]] = {k: [] for k in _SNAPSHOT_KEYS}
        self._stat_runs: list[int] = []
        self._set_runs: list[int] = []
        self._event_runs: list[int] = []
        # player_statistics rows: the served @id / $ / @authorized, converted at flush
        self._st_cols: dict[str, list[Any]] = {k: [] for k in _ST_COLS}
        # player_datasets: one Arrow chunk per summary of its strings (see `_DataSets`), with
        # (data sets, data points, values) per summary to cut them, and the run counts.
        # Converting each summary's ~1,600 values at once keeps millions of small Python strings
        # from piling up until flush (they made the cyclic GC, not the parsing, the dominant cost).
        self._ds_strings: list[pa.Array] = []
        self._ds_layout: list[tuple[int, int, int]] = []
        self._ds_id_runs: list[int] = []
        self._ds_point_runs: list[int] = []
        # player_timeline rows: the raw Event dicts, converted at flush
        self._ev_raw: list[dict[str, Any]] = []
        # tournaments rows: keys, the served attributes (converted at flush) and `extra`
        self._t_keys: list[tuple[str, str]] = []  # (network, tournament id)
        self._t_cols: dict[str, list[Any]] = {k: [] for k in _T_COLS}
        self._t_extra: list[dict[str, str | None]] = []
        self._t_extras = 0  # how many of them are not empty
        # tournament_entries rows: keys, the entries' attributes and their tournaments'
        self._e_keys: list[tuple[str, str, str]] = []  # (network, tournament id, player)
        # each row's answer's server time (`listed_at`: how the night keeps one row of a key)
        self._t_listed: list[Any] = []
        self._e_listed: list[Any] = []
        self._e_cols: dict[str, list[Any]] = {k: [] for k in _E_COLS}
        self._et_cols: dict[str, list[Any]] = {k: [] for k in _ET_COLS}

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
        filter_sent: str | None = None,
        window: str = "as_of",
        anchored: bool = False,
    ) -> None:
        """Append one player-summary response (the ``Response`` root, success only).

        Raises :class:`~tourneylake.api.tree.MalformedPayload` for an answer that is no summary
        or holds structural garbage, and then keeps nothing of it: everything is read and
        checked first and appended only at the end, so the batch is exactly as before the call.
        """
        if response.name != "Response":
            raise MalformedPayload(f"expected the Response root, got {element_path([response.name])!r}")
        summary = F.read(response.raw) if self.fast else None
        if summary is not None and summary.success is not None and summary.success.lower() == "false":
            summary = None  # refused the tree way, with its message
        if summary is not None:
            served, statistics, datasets, events, tournaments = self._read_fast(summary, response.raw, network, player)
            self.fast_reads += 1
        else:
            served, statistics, datasets, events, tournaments = self._read_tree(response, network, player)
            self.tree_reads += 1
        snapshot = {
            "network": network,
            "player": player,
            "filter_name": filter_name or "",
            "filter_expression": filter_expression or "",
            "filter_sent": filter_expression or "" if filter_sent is None else filter_sent,
            "filter_window": window,
            "anchored": anchored,
            **served,
            "display_usd_rate": self.rates.rate(served["display_currency"]),
            "fetched_at": C.epoch_seconds(fetched_at),
        }

        # Nothing above touched the batch; from here on nothing raises.
        n_sets = 0
        if datasets is not None:
            n_sets = datasets.values
            self._ds_strings.append(datasets.strings)
            self._ds_layout.append((len(datasets.id_runs), len(datasets.point_runs), n_sets))
            self._ds_id_runs += datasets.id_runs
            self._ds_point_runs += datasets.point_runs
        n_stats = len(statistics[0])
        snapshot["statistic_count"] = n_stats
        snapshot["tournament_count"] = tournaments.count
        snap = self._snap
        for key, value in snapshot.items():
            snap[key].append(value)
        for col, values in zip(self._st_cols.values(), statistics, strict=True):
            col += values
        self._stat_runs.append(n_stats)
        self._set_runs.append(n_sets)
        self._ev_raw += events
        self._event_runs.append(len(events))
        if tournaments.count:
            self._keep_tournaments(tournaments, snapshot["server_time"])

    def _keep_tournaments(self, tournaments: _Tournaments, listed_at: Any) -> None:
        self._seen_tournaments.add(tournaments.seen)
        self._seen_entries.add(tournaments.seen_entries)
        if self._hashes is not None:
            for table, rows, keys in (
                ("tournaments", tournaments.row_hashes, tournaments.keys),
                ("tournament_entries", tournaments.entry_row_hashes, tournaments.entry_keys),
            ):
                self._hashes[table][0].extend(rows)
                self._hashes[table][1].extend(map(hash, keys))
        self._note_kept("tournaments", tournaments.keys)
        self._note_kept("tournament_entries", tournaments.entry_keys)
        self._t_listed += [listed_at] * len(tournaments.keys)
        self._e_listed += [listed_at] * len(tournaments.entry_keys)
        self._t_keys += tournaments.keys
        self._t_extra += tournaments.extras
        self._t_extras += sum(1 for e in tournaments.extras if e)
        self._e_keys += tournaments.entry_keys
        fast = tournaments.fast
        if fast and tournaments.raws:
            fields = list(zip(*map(_astuple, tournaments.raws), strict=True))
            for col, index in zip(self._t_cols.values(), _T_FIELD_INDEX, strict=True):
                col += fields[index]
        elif not fast:
            for col, values in zip(self._t_cols.values(), _T_FROM_DICTS(tournaments.raws), strict=True):
                col += values
        for cols, read, raws in (
            (self._e_cols, _E_FROM[fast], tournaments.entry_raws),
            (self._et_cols, _ET_FROM[fast], tournaments.entry_tournaments),
        ):
            for col, values in zip(cols.values(), read(raws), strict=True):
                col += values

    # ------------------------------------------------------------------ the tree path
    def _read_tree(self, response: Node, network: str, player: str) -> _Parts:
        root = response.raw if type(response.raw) is dict else {}
        success = _value(root.get("@success"), "Response/@success")
        if success is not None and success.lower() == "false":
            raise MalformedPayload("an error response is not a player summary (normalise only successful calls)")
        payload = _first(root.get("PlayerResponse"))
        view = _first(payload.get("PlayerView")) if payload else None
        p = _first(view.get("Player")) if view else None
        stats = _first(p.get("Statistics")) if p else None
        currency = _value(stats.get("@displayCurrency"), _P_STATS + "/@displayCurrency") if stats else None
        served = {  # in this order: the first garbage found names the error
            "served_filter": _element_text(view.get("Filter"), _P_VIEW + "/Filter") if view else None,
            "found": p is not None,
            "served_name": _value(p.get("@name"), _P_PLAYER + "/@name") if p else None,
            "country": _value(p.get("@country"), _P_PLAYER + "/@country") if p else None,
            "country_name": _value(p.get("@countryName"), _P_PLAYER + "/@countryName") if p else None,
            "last_activity_at": _value(p.get("@lastActivity"), _P_PLAYER + "/@lastActivity") if p else None,
            "display_currency": currency,
            "server_time": _value(root.get("@timestamp"), "Response/@timestamp"),
            "metadata_hash": _value(root.get("@metadataHash"), "Response/@metadataHash"),
        }
        statistics = self._read_statistics(stats) if stats is not None else _NO_STATISTICS
        datasets = self._read_datasets(stats) if stats is not None else None
        events = self._read_timeline(stats) if stats is not None else []
        recent = _first(p.get("RecentTournaments")) if p else None
        listed_at = served["server_time"]
        tournaments = self._read_tournaments(recent, network, player, listed_at) if recent else _NO_TOURNAMENTS
        return served, statistics, datasets, events, tournaments

    @staticmethod
    def _read_statistics(stats: dict[str, Any]) -> list[list[Any]]:
        found = C.items(stats.get("Statistic"))
        for s in found:
            if type(s) is not dict:
                found = [s for s in found if type(s) is dict]
                break
        _check_values(found, _P_STATS + "/Statistic")
        return _ST_FROM_DICTS(found)

    @staticmethod
    def _read_datasets(stats: dict[str, Any]) -> _DataSets | None:
        """This summary's data set columns (see ``_DataSets``), or ``None`` when it has none.

        The hottest loop: a summary holds ~650 data points and ~1,600 values. Per value only
        the series id and the value are collected; data set id / x / z once per set or point
        with a repeat count; types are looked up vectorised at flush. The fast path indexes the
        JSON lists directly (plain loops beat map/methodcaller on 3.11); a set with any odd
        shape (a lone Y as a bare object in XML, a Y without a value, ...) is re-read with the
        tolerant path, with the same result."""
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
        return _ds_columns(ids, id_runs, xs, zs, point_runs, series, values)

    @staticmethod
    def _read_timeline(stats: dict[str, Any]) -> list[dict[str, Any]]:
        timeline = _first(stats.get("Timeline"))
        if timeline is None:
            return []
        events = C.items(timeline.get("Event"))
        for e in events:
            if type(e) is not dict:
                events = [e for e in events if type(e) is dict]
                break
        _check_values(events, _P_STATS + "/Timeline/Event")
        return events  # every column (and the attributes map) is built at flush

    def _read_tournaments(self, recent: dict[str, Any], network: str, player: str, listed_at: Any) -> _Tournaments:
        # Only the keys (for the night's dedup) are read here; the attributes are converted
        # from the raw dicts at flush. Keys new to the night are collected in `out.seen` and
        # join the normaliser's own sets only once the whole payload has been read.
        folded = player.casefold()
        n = 0
        keys: list[tuple[str, str]] = []
        raws: list[dict[str, Any]] = []
        entry_keys: list[tuple[str, str, str]] = []
        entry_raws: list[dict[str, Any]] = []
        entry_ts: list[dict[str, Any]] = []
        tournaments = C.items(recent.get("Tournament"))
        _check_tournaments(tournaments)
        for index, t in enumerate(tournaments):
            if type(t) is not dict:
                continue
            n += 1
            tid = t.get("@id")
            if type(tid) is not str or not tid:
                tid = _value(tid, f"{_P_TOURNAMENT}[{index}]/@id")
                if tid is None:
                    continue  # no key: nothing to attach it to
            net = t.get("@network")
            if type(net) is not str or not net:
                net = _value(net, f"{_P_TOURNAMENT}[{index}]/@network") or network
            keys.append((net, tid))
            raws.append(t)
            for e in _entries(t):
                if type(e) is not dict:
                    continue
                served = e.get("@playerName")
                if type(served) is not str or not served:
                    served = _value(served, f"{_P_TOURNAMENT}[{index}]/TournamentEntry/@playerName")
                who = player if served is None or served.casefold() == folded else served
                entry_keys.append((net, tid, who))
                entry_raws.append(e)
                entry_ts.append(t)
        out = self._dedup(keys, raws, entry_keys, entry_raws, entry_ts, fast=False, listed_at=listed_at)
        known = _TOURNAMENT_KEYS.issuperset
        out.extras = [
            _NO_EXTRA
            if known(t)
            else {k[1:]: C.text(v) for k, v in sorted(t.items()) if k[:1] == "@" and k not in _TOURNAMENT_ATTRS}
            for t in out.raws
        ]
        out.count = n
        return out

    def _dedup(
        self,
        keys: list[Any],
        raws: list[Any],
        entry_keys: list[Any],
        entry_raws: list[Any],
        entry_ts: list[Any],
        *,
        fast: bool,
        listed_at: Any,
    ) -> _Tournaments:
        """The tournaments and entries not yet kept tonight as this answer lists them: the
        same key, listed at the same server time with the same values (``listed_at``: this
        answer's). A key listed otherwise is kept again, and the night keeps one row of it by
        content once every answer is in (``night_tables.keep_one_row_per_key``); ``entry_ts``
        are the entries' tournaments."""
        out = _Tournaments(fast=fast)
        tournament, entry = (_fast_tournament, _fast_entry) if fast else (_tree_tournament, _tree_entry)
        # The entries' tournaments are most often the very list of the tournaments: each hashed once.
        listed = {id(t): hash((listed_at, tournament(t))) for t in (raws if entry_ts is raws else (*raws, *entry_ts))}
        rows = [(key, listed[id(t)]) for key, t in zip(keys, raws, strict=True)]
        keep = _new_keys(rows, self._seen_tournaments, out.seen)
        out.keys, out.raws = (keys, raws) if keep is None else ([keys[i] for i in keep], [raws[i] for i in keep])
        if self._hashes is not None:
            out.row_hashes = list(map(hash, rows if keep is None else [rows[i] for i in keep]))
        entry_rows = [(key, entry(e), listed[id(t)]) for key, e, t in zip(entry_keys, entry_raws, entry_ts, strict=True)]
        keep = _new_keys(entry_rows, self._seen_entries, out.seen_entries)
        if self._hashes is not None:
            out.entry_row_hashes = list(map(hash, entry_rows if keep is None else [entry_rows[i] for i in keep]))
        if keep is None:
            out.entry_keys, out.entry_raws, out.entry_tournaments = entry_keys, entry_raws, entry_ts
        else:
            out.entry_keys = [entry_keys[i] for i in keep]
            out.entry_raws = [entry_raws[i] for i in keep]
            out.entry_tournaments = [entry_ts[i] for i in keep]
        if fast:
            out.extras = [_NO_EXTRA] * len(out.raws)
        return out

    # ------------------------------------------------------------------ the fast path
    def _read_fast(self, summary: F.Summary, root: dict[str, Any], network: str, player: str) -> _Parts:
        """The tree path's reading of a summary whose shape the structs accepted (see
        :mod:`._fast`): every value is a string or null, every element where it belongs, so
        nothing here can fail and no check is needed.

        Statistics, data sets and timeline events are not in the structs: the tree path reads
        them from the raw dicts about as fast as anything could (one pass over the types in C
        to check them, plain loops or ``map`` to collect them), where a struct per value would
        cost more. So they are read from the raw tree ``root`` by the tree path's own readers,
        in the tree path's order: their errors are its errors. What the structs save is the
        tree path's Python walk over the tournaments and their checks."""
        first, items = F.first, F.items
        payload = first(summary.PlayerResponse)
        view = first(payload.PlayerView) if payload is not None else None
        p = first(view.Player) if view is not None else None
        stats = first(p.Statistics) if p is not None else None
        served = {
            "served_filter": (view.Filter or None) if view is not None else None,
            "served_name": (p.name or None) if p is not None else None,
            "found": p is not None,
            "country": (p.country or None) if p is not None else None,
            "country_name": (p.country_name or None) if p is not None else None,
            "last_activity_at": (p.last_activity or None) if p is not None else None,
            "display_currency": (stats.display_currency or None) if stats is not None else None,
            "server_time": summary.timestamp or None,
            "metadata_hash": summary.metadata_hash or None,
        }
        if stats is None:
            statistics, datasets, events = _NO_STATISTICS, None, []
        else:  # the tree path's readers, on the raw Statistics element (see above)
            raw = _raw_statistics(root)
            statistics = self._read_statistics(raw)
            datasets = self._read_datasets(raw)
            events = self._read_timeline(raw)
        recent = first(p.RecentTournaments) if p is not None else None
        listed_at = served["server_time"]
        tournaments = (
            _NO_TOURNAMENTS if recent is None else self._fast_tournaments(items(recent.Tournament), network, player, listed_at)
        )
        return served, statistics, datasets, events, tournaments

    def _fast_tournaments(self, tournaments: list[Any], network: str, player: str, listed_at: Any) -> _Tournaments:
        """`_read_tournaments` on structs: the keys with comprehensions, and one entry per
        tournament (the usual shape: a bare TournamentEntry) without a Python loop."""
        ts = tournaments if all(map(_t_id, tournaments)) else [t for t in tournaments if t.id]
        keys = list(zip([t.network or network for t in ts], map(_t_id, ts), strict=True))
        folded = player.casefold()
        entries = list(map(_t_entry, ts))
        if ts and set(map(type, entries)) == _ENTRY_ONLY:
            served = map(_e_name, entries)
            # served as asked (the usual case) needs no casefold
            who = [player if not s or s == player or s.casefold() == folded else s for s in served]
            entry_keys = [(net, tid, w) for (net, tid), w in zip(keys, who, strict=True)]
            entry_ts = ts
        else:
            entry_keys, entries, entry_ts = [], [], []
            items = F.items
            for (net, tid), t in zip(keys, ts, strict=True):
                for e in items(t.TournamentEntry):
                    s = e.player_name
                    entry_keys.append((net, tid, player if not s or s.casefold() == folded else s))
                    entries.append(e)
                    entry_ts.append(t)
        out = self._dedup(keys, ts, entry_keys, entries, entry_ts, fast=True, listed_at=listed_at)
        out.count = len(tournaments)
        return out

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
            self._seen_tournaments.commit()
            self._seen_entries.commit()
            if self._hashes is not None:
                self.flushed_hashes = {
                    table: (np.array(rows, dtype=np.int64), np.array(keys, dtype=np.int64))
                    for table, (rows, keys) in self._hashes.items()
                }
                self.track_hashes()
            for kept in self._kept_keys.values():
                kept.commit()
            self._reset()

    def _note_kept(self, table: str, keys: list[Any]) -> None:
        """Keys of ``table`` kept tonight: the table joins :attr:`repeating` once one is kept twice."""
        if not keys or table in self.repeating:
            return
        kept = self._kept_keys[table]
        hashes = list(map(hash, keys))
        if len(set(hashes)) < len(hashes) or not kept.batch.isdisjoint(hashes) or not all(kept.unseen_before(hashes)):
            self.repeating.add(table)
            self._kept_keys[table] = SeenKeys()  # not looked at again tonight
        else:
            kept.add(hashes)

    def _date_col(self, n: int) -> pa.Array:
        return C.repeat(self.night, n, pa.date32())

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
            "filter_sent": C.str_array(s["filter_sent"]),
            "filter_window": C.str_array(s["filter_window"]),
            "anchored": pa.array(s["anchored"], pa.bool_()),
            "served_filter": C.str_array(s["served_filter"]),
            "served_name": C.str_array(s["served_name"]),
            "found": pa.array(s["found"], pa.bool_()),
            "country": C.str_array(s["country"]),
            "country_name": C.str_array(s["country_name"]),
            "last_activity_at": C.time_array(s["last_activity_at"], "player_snapshots.last_activity_at"),
            "display_currency": C.str_array(s["display_currency"]),
            "display_usd_rate": pa.array(s["display_usd_rate"], _F64),
            "statistic_count": pa.array(s["statistic_count"], _I32),
            "tournament_count": pa.array(s["tournament_count"], _I32),
            "server_time": C.time_array(s["server_time"], "player_snapshots.server_time"),
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
    def _typed_values(typ: pa.Array, values: pa.Array, rate: pa.Array, table: str) -> dict[str, pa.Array]:
        number = C.float_array(values, f"{table}.value_number")
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
        f = _fields(self._st_cols)
        ids, raw_values, auth = f["@id"], f["$"], f["@authorized"]
        types = self.statistic_types
        if isinstance(ids, pa.Array):
            names = pa.array(list(types), _STR)
            typ = pa.array(list(types.values()), _STR).take(pc.index_in(ids, value_set=names))
        else:
            ids = C.str_array(ids)  # JSON numbers read like their string spelling
            typ = pa.array([types.get(sid) for sid in ids.to_pylist()], _STR)
        typ = typ.dictionary_encode()
        if isinstance(raw_values, pa.Array):
            values = pc.if_else(pc.equal(raw_values, ""), pa.scalar(None, _STR), raw_values)
        else:
            values = C.str_array([None if v == "" else v for v in raw_values])
        if isinstance(auth, pa.Array):
            authorized = pc.invert(pc.equal(pc.utf8_lower(auth), "false")).fill_null(True)
        else:
            authorized = pa.array([a is None or str(a).lower() != "false" for a in auth], pa.bool_())
        typed = self._typed_values(typ, values, keys["_rate"], "player_statistics")
        schema = SCHEMAS["player_statistics"]
        time_values = pc.if_else(typed["_is_time"], values, pa.scalar(None, _STR))
        cols = {
            **keys,
            **typed,
            "statistic": ids,
            "type": typ,
            "value": values,
            "value_time": C.time_array(time_values, "player_statistics.value_time"),
            "authorized": authorized,
        }
        return pa.Table.from_arrays([cols[f.name] for f in schema], schema=schema)

    def _ds_columns(self) -> list[pa.Array]:
        """The batch's data set string columns (ids, x, z, series, values), each cut from the
        summaries' chunks with one ``take``."""
        strings = pa.concat_arrays(self._ds_strings) if self._ds_strings else pa.array([], _STR)
        layout = np.array(self._ds_layout, dtype=np.int64).reshape(-1, 3)
        sets, points, values = layout[:, 0], layout[:, 1], layout[:, 2]
        chunk = sets + 2 * points + 2 * values
        at = np.cumsum(chunk) - chunk  # where each summary's chunk starts
        out = []
        for lens in (sets, points, points, values, values):
            out.append(_gather(strings, at, lens))
            at = at + lens
        return out

    def _datasets_table(self) -> pa.Table:
        keys = self._long_keys(self._set_runs)
        ids, xs, zs, series, values = self._ds_columns()
        id_runs, point_runs = self._ds_id_runs, self._ds_point_runs
        dataset = C.dict_runs(ids.to_pylist(), id_runs)
        # type code of (data set, series): a small table over (data set code × series code)
        width = len(self._series_names)
        table = pa.array([self._type_code.get((d, s)) for d in dataset.dictionary.to_pylist() for s in self._series_names], _I32)
        combined = pc.add(pc.multiply(dataset.indices, width), pc.index_in(series, value_set=self._series_name_set))
        typ = pa.DictionaryArray.from_arrays(table.take(combined), self._series_type_names)
        typed = self._typed_values(typ, values, keys["_rate"], "player_datasets")
        schema = SCHEMAS["player_datasets"]
        x = C.runs(xs, point_runs, _STR)
        cols = {
            **keys,
            **typed,
            **_typed_axis(x, dataset, self.axis_types),
            "dataset": dataset,
            "x": x,
            "z": C.runs(zs, point_runs, _STR),
            "series": series,
            "type": typ,
            "value": values,
        }
        return pa.Table.from_arrays([cols[f.name] for f in schema], schema=schema)

    def _timeline_table(self) -> pa.Table:
        runs = self._event_runs
        raws = self._ev_raw
        n = sum(runs)
        flat = _flat_attributes(raws) if raws else None
        ev = _pick(flat, list(_EVENT_COLUMNS.values())) if flat is not None else _struct_fields(raws, _EV_STRUCT)
        col = {name: ev[key] for name, key in _EVENT_COLUMNS.items()}
        schema = SCHEMAS["player_timeline"]
        currency = _str(col["currency"])
        prize = C.float_array(col["prize"], "player_timeline.prize")
        rate = self._rate_col(currency)
        prize_usd = C.usd(prize, rate)
        cols = {
            "snapshot_date": self._date_col(n),
            "network": self._per_player("network", runs),
            "player": self._per_player("player", runs),
            "filter_name": self._per_player("filter_name", runs),
            "event_id": _str(col["event_id"]),
            "category": _str(col["category"]),
            "event_at": C.time_array(col["event_at"], "player_timeline.event_at"),
            "code": _str(col["code"]),
            "name": _str(col["name"]),
            "description": _str(col["description"]),
            "points": C.int_array(col["points"], _I32, "player_timeline.points"),
            "priority": C.int_array(col["priority"], _I32, "player_timeline.priority"),
            "is_negative": _bools(col["is_negative"]),
            "game_id": _str(col["game_id"]),
            "tournament_name": _str(col["tournament_name"]),
            "position": C.int_array(col["position"], _I32, "player_timeline.position"),
            "entrants": C.int_array(col["entrants"], _I32, "player_timeline.entrants"),
            "currency": currency,
            "prize": prize,
            "prize_usd": prize_usd,
            "usd_rate_missing": C.rate_missing([prize], rate),
            "url": _str(col["url"]),
            "attributes": _attribute_maps(raws, flat),
        }
        return pa.Table.from_arrays([cols[f.name] for f in schema], schema=schema)

    def _rate_col(self, currencies: Any) -> pa.Array:
        """Each row's USD rate (NULL for NULL or an unknown / rate-less currency)."""
        if not isinstance(currencies, pa.Array):
            rate = self.rates.rate
            return pa.array([rate(c) for c in currencies], _F64)
        known = [c for c in self.rates.rates if c != "USD"]
        names = pa.array(["USD", *known], _STR)
        values = pa.array([1.0, *(self.rates.rates[c] for c in known)], _F64)
        return values.take(pc.index_in(currencies, value_set=names))

    def _tournaments_table(self) -> pa.Table:
        n = len(self._t_keys)
        nets, ids = zip(*self._t_keys, strict=True) if n else ((), ())
        schema = SCHEMAS["tournaments"]
        t = _fields(self._t_cols)
        currency = _blank_null(t["@currency"])
        rate = self._rate_col(currency)
        money = {
            k: C.float_array(t[a], f"tournaments.{k}")
            for k, a in (
                ("stake", "@stake"),
                ("rake", "@rake"),
                ("prize_pool", "@prizePool"),
                ("guarantee", "@guarantee"),
                ("overlay", "@overlay"),
            )
        }
        buy_in = C.finite(pc.add(money["stake"], money["rake"]))  # two huge amounts overflow
        cols: dict[str, pa.Array] = {
            "snapshot_date": self._date_col(n),
            "network": C.str_array(nets),
            "tournament_id": C.str_array(ids),
            "name": _str(t["@name"]),
            "started_at": C.time_array(t["@date"], "tournaments.started_at"),
            "duration_s": C.int_array(t["@duration"], column="tournaments.duration_s"),
            "currency": currency,
            "buy_in": buy_in,
            "buy_in_usd": C.usd(buy_in, rate),
            "re_entries": C.int_array(t["@reEntries"], _I32, "tournaments.re_entries"),
            "total_entrants": C.int_array(t["@totalEntrants"], _I32, "tournaments.total_entrants"),
            "players_per_table": C.int_array(t["@playersPerTable"], _I32, "tournaments.players_per_table"),
            "game": _str(t["@game"]),
            "game_class": _str(t["@gameClass"]),
            "structure": _str(t["@structure"]),
            "flags": _flags(t["@flags"], schema.field("flags").type),
            "state": _str(t["@state"]),
            "usd_rate": rate,
            "usd_rate_missing": C.rate_missing(money.values(), rate),
            "extra": C.map_array(self._t_extra) if self._t_extras else _empty_maps(n),
            "listed_at": C.time_array(self._t_listed, "tournaments.listed_at"),
        }
        for k, amount in money.items():
            cols[k] = amount
            cols[k + "_usd"] = C.usd(amount, rate)
        return pa.Table.from_arrays([cols[f.name] for f in schema], schema=schema)

    def _entries_table(self) -> pa.Table:
        n = len(self._e_keys)
        nets, ids, players = zip(*self._e_keys, strict=True) if n else ((), (), ())
        schema = SCHEMAS["tournament_entries"]
        e = _fields(self._e_cols)
        t = _fields(self._et_cols)
        currency = _blank_null(t["@currency"])
        rate = self._rate_col(currency)
        prize = C.float_array(e["@prize"], "tournament_entries.prize")
        stake = C.float_array(t["@stake"], "tournament_entries.stake")
        rake = C.float_array(t["@rake"], "tournament_entries.rake")
        # A player who did not cash has no @prize: their result is −(stake + rake).
        profit = C.finite(pc.subtract(pc.subtract(prize.fill_null(0.0), stake), rake))
        cols = {
            "snapshot_date": self._date_col(n),
            "network": C.str_array(nets),
            "tournament_id": C.str_array(ids),
            "player": C.str_array(players),
            "position": C.int_array(e["@position"], _I32, "tournament_entries.position"),
            "cashed": pc.fill_null(pc.greater(prize, 0.0), False),
            "prize": prize,
            "prize_usd": C.usd(prize, rate),
            "multientries": C.int_array(e["@multientries"], _I32, "tournament_entries.multientries"),
            "currency": currency,
            "stake": stake,
            "rake": rake,
            "profit": profit,
            "profit_usd": C.usd(profit, rate),
            "usd_rate": rate,
            "usd_rate_missing": C.rate_missing([prize, stake, rake, profit], rate),
            "listed_at": C.time_array(self._e_listed, "tournament_entries.listed_at"),
        }
        return pa.Table.from_arrays([cols[f.name] for f in schema], schema=schema)


# An x value as the service writes a Timestamp axis (epoch seconds) or a Number axis.
_EPOCH = r"^-?[0-9]{1,11}$"
_NUMBER = r"^-?[0-9]+(\.[0-9]+)?$"


def _typed_axis(x: pa.Array, dataset: pa.DictionaryArray, axis_types: Mapping[str, str]) -> dict[str, pa.Array]:
    """``x`` read by its data set's axis type from metadata: ``x_time`` for a Timestamp axis,
    ``x_number`` for a Number axis; NULL elsewhere, or when the value is not one (``x`` keeps it).

    Each distinct x value is read once (a batch repeats the same hours, months and stakes for
    every series and player), and the axis type once per data set."""
    values = pc.dictionary_encode(x.cast(_STR))
    distinct = values.dictionary
    null = pa.scalar(None, _STR)
    seconds = pc.if_else(pc.match_substring_regex(distinct, _EPOCH), distinct, null).cast(pa.int64())
    numbers = pc.if_else(pc.match_substring_regex(distinct, _NUMBER), distinct, null).cast(pa.float64())
    names = dataset.dictionary.to_pylist()

    def rows_of(kind: str) -> pa.Array:  # per row: is this row's data set's x axis of ``kind``?
        return pa.array([axis_types.get(name) == kind for name in names], pa.bool_()).take(dataset.indices)

    return {
        "x_time": pc.if_else(rows_of("Timestamp"), seconds.take(values.indices), None).cast(pa.timestamp("s", tz="UTC")),
        "x_number": pc.if_else(rows_of("Number"), numbers.take(values.indices), None),
    }


def _flat_attributes(raws: list[dict[str, Any]]) -> tuple[pa.Array, pa.Array, np.ndarray] | None:
    """Every key and value of the raw dicts as two flat string arrays, with the item count of
    each dict; ``None`` when some value is not a string (or NULL)."""
    try:
        keys = pa.array(list(chain.from_iterable(raws)), _STR)
        values = pa.array(list(chain.from_iterable(map(dict.values, raws))), _STR)
    except _CONVERT_ERRORS:
        return None
    return keys, values, np.fromiter(map(len, raws), dtype=np.int64, count=len(raws))


def _pick(flat: tuple[pa.Array, pa.Array, np.ndarray], names: list[str]) -> dict[str, pa.Array]:
    """``raw.get(name)`` of every raw dict for each name, from the flat key / value arrays (a dict
    holds a key at most once)."""
    keys, values, lens = flat
    n = len(lens)
    rows = np.repeat(np.arange(n, dtype=np.int64), lens)
    codes = pc.index_in(keys, value_set=pa.array(names, _STR)).fill_null(-1).to_numpy(zero_copy_only=False)
    out = {}
    for j, name in enumerate(names):
        at = np.flatnonzero(codes == j)
        index = np.full(n, -1, dtype=np.int64)
        index[rows[at]] = at
        out[name] = values.take(pa.array(index, mask=index < 0))
    return out


def _attribute_maps(raws: list[dict[str, Any]], flat: tuple[pa.Array, pa.Array, np.ndarray] | None) -> pa.Array:
    """``C.attributes`` of every raw dict as one MAP column, built from the flat key / value arrays."""
    if not raws:
        return C.map_array([])
    if flat is None:
        return C.map_array([C.attributes(e) for e in raws])
    keys, values, lens = flat
    keep = pc.starts_with(keys, "@")  # and a JSON null is no value (`C.text`)
    if values.null_count:
        keep = pc.and_(keep, pc.is_valid(values))
    if pc.all(keep).as_py() is not True:
        rows = np.repeat(np.arange(len(raws), dtype=np.int64), lens)
        lens = np.bincount(rows[keep.to_numpy(zero_copy_only=False)], minlength=len(raws))
        keys, values = keys.filter(keep), values.filter(keep)
    offsets = np.zeros(len(raws) + 1, dtype=np.int32)
    np.cumsum(lens, out=offsets[1:])
    return pa.MapArray.from_arrays(pa.array(offsets), pc.utf8_slice_codeunits(keys, 1), values, type=STR_MAP)
