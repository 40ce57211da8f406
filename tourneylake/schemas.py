"""The table catalogue: every lake table's fixed schema, with a description of every column.

One place defines each table: its Arrow schema (what the normaliser builds and the lake writes,
what the warehouse's DDL and loads are rendered from with ``sql/tables.sql``) and the
documentation rendered into the docs' tables reference (:func:`tables_markdown`). Conventions:
``snapshot_date`` is the night the data was harvested for (the hive partition, not stored in the
files); every time is ``timestamp[s, tz=UTC]`` from the service's epoch seconds; money is
``float64`` in the currency served, each money column with a ``_usd`` twin (amount / the night's
rate; a currency without a rate gives NULL and ``usd_rate_missing = true``, never a guess;
float64 rather than DECIMAL since the service sends at most two decimals on amounts far below
2**53 cents, and float sums need no casts anywhere); keys are never NULL (``filter_name`` is
``''`` unfiltered).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

__all__ = [
    "SCHEMAS",
    "TABLES",
    "TableSpec",
    "duckdb_type",
    "tables_markdown",
]

TS = pa.timestamp("s", tz="UTC")
STR = pa.string()
F64 = pa.float64()
I64 = pa.int64()
I32 = pa.int32()
BOOL = pa.bool_()
DATE = pa.date32()
STR_MAP = pa.map_(pa.string(), pa.string())
# Dictionary-encoded string: the low-cardinality columns of the big long tables (network,
# player, filter, currency, data set, type). Same values as a string; Parquet stores them
# dictionary-encoded anyway; DuckDB reads VARCHAR.
DSTR = pa.dictionary(pa.int32(), pa.string())


@dataclass(frozen=True)
class TableSpec:
    """A lake table: its schema, what one row is, and how the warehouse loads it."""

    name: str
    doc: str
    grain: str
    load: str  # "snapshot" | "reference" | "dedup" | "whole"
    key: tuple[str, ...]
    columns: tuple[tuple[str, pa.DataType, str], ...]
    #: Columns holding this project's own codes (not the service's open-ended ones), with every
    #: value they take: dbt's ``accepted_values`` on the source.
    codes: tuple[tuple[str, tuple[str, ...]], ...] = ()
    #: Key columns that may be NULL (every other key column never is: dbt's ``not_null``).
    nullable_key: tuple[str, ...] = ()

    @property
    def schema(self) -> pa.Schema:
        return pa.schema([pa.field(name, dtype) for name, dtype, _ in self.columns])

    @property
    def descriptions(self) -> dict[str, str]:
        return {name: desc for name, _, desc in self.columns}

    @property
    def row_key(self) -> tuple[str, ...]:
        """What names one row of the warehouse table: the key, with the night for every table
        that keeps several nights (all but the deduplicated ones)."""
        return self.key if self.load == "dedup" else ("snapshot_date", *self.key)


_SNAP = ("snapshot_date", DATE, "night of the harvest (hive partition in the lake)")
#: The deduplicated tables' row comes from one answer: when answers of a night list a key
#: differently, the latest listing is kept, then the row's own values decide (never the order
#: the answers were read in): `sql/tables.sql`, `night_one_per_key`.
_LISTED_AT = (
    "listed_at",
    TS,
    "server time (`Response/@timestamp`) of the answer this row was read from: of a night's answers that list the key "
    "differently, the latest one's row is kept (then the row's values decide, never the order the answers were read in)",
)
_USD_MISSING = (
    "usd_rate_missing",
    BOOL,
    "true when an amount needed a USD conversion and its currency had no known rate (the `_usd` columns are then NULL)",
)


def _reference(
    name: str,
    doc: str,
    grain: str,
    key: tuple[str, ...],
    *columns: tuple[str, pa.DataType, str],
    codes: tuple[tuple[str, tuple[str, ...]], ...] = (),
) -> TableSpec:
    """A reference table: the latest snapshot is the warehouse's, every night's is the lake's."""
    return TableSpec(name, doc, grain, "reference", key, (_SNAP, *columns), codes=codes)


def _summary_key(dtype: pa.DataType) -> tuple[tuple[str, pa.DataType, str], ...]:
    """The columns that say whose summary a row comes from (the player tables' key)."""
    return (
        ("network", dtype, "network as requested (metadata `Network/@name`)"),
        ("player", dtype, "player name as requested (the watchlist's)"),
        ("filter_name", dtype, "watchlist filter name; `''` for the unfiltered summary (never NULL)"),
    )


_SPECS: list[TableSpec] = [
    # ------------------------------------------------------------------ metadata (reference)
    TableSpec(
        "currencies",
        "Currencies of the metadata snapshot, with the USD rates in force that night. Unlike the other metadata "
        "tables, the warehouse keeps every night's: the models convert each entry's money at the rates of the night "
        "its tournament started in (`player_results_usd`).",
        "one row per snapshot and currency",
        "snapshot",
        ("iso",),
        (
            _SNAP,
            ("iso", STR, "ISO code (`Currency/@iso`)"),
            ("symbol", STR, "display symbol"),
            ("rate", F64, "units of this currency per 1 USD (`@rate`); NULL when the service did not send one"),
            ("rate_known", BOOL, "true when `rate` is usable (present, positive); USD is always known (rate 1)"),
            ("metadata_hash", STR, "`Response/@metadataHash` of the metadata snapshot"),
            ("extra", STR_MAP, "any other attributes, as served"),
        ),
    ),
    _reference(
        "networks",
        "Poker networks the service tracks (`Networks/Network`).",
        "one row per snapshot and network",
        ("name",),
        ("name", STR, "network name as used in paths (`@name`, e.g. `PokerStars`)"),
        ("code", STR, "short code (`@code`)"),
        ("region", STR, "region code (`@region`, see `regions`)"),
        ("closed", BOOL, "network has closed"),
        ("searchable", BOOL, "network can be searched"),
        ("hud_coverage", BOOL, "`@hudCoverage`"),
        ("coverage_stage", STR, "`CoverageStage` (e.g. `Full`)"),
        ("full_coverage_start", STR, "`FullCoverageStartDate` as served (`M/YYYY`)"),
        ("full_coverage_tracking_rate", STR, "`FullCoverageTrackingRate` as served (e.g. `99%`)"),
        ("earliest_game_tracked", STR, "`EarliestGameTrackedDate` as served (`M/YYYY`)"),
        ("tracked_games_count", I64, "`TrackedGamesCount`"),
        (
            "skins",
            pa.list_(pa.struct([("id", STR), ("name", STR), ("major", BOOL)])),
            "the network's skins (a single skin is served as a bare object; both read)",
        ),
        ("skin_count", I32, "number of skins"),
        ("extra", STR_MAP, "any other attributes and text children, as served"),
    ),
    _reference(
        "regions",
        "Regions of the metadata (`Regions/Region`).",
        "one row per snapshot and region",
        ("code",),
        ("code", STR, "region code"),
        ("name", STR, "region name"),
        ("image", STR, "icon path, when served"),
    ),
    _reference(
        "filter_constraints",
        "Filter constraint types (`FilterDefinition/ConstraintDefinition`).",
        "one row per snapshot and constraint",
        ("constraint_id",),
        ("constraint_id", STR, "constraint name used in filter strings (e.g. `Stake`)"),
        ("type", STR, "constraint type as served (e.g. `Multiselect`, `CashRange`, `Context,Range`)"),
        ("option_count", I32, "number of options listed in `filter_options`"),
    ),
    _reference(
        "filter_options",
        "Allowed values of the multiselect filter constraints (`ConstraintDefinition/Option`).",
        "one row per snapshot, constraint and option",
        ("constraint_id", "option_id"),
        ("constraint_id", STR, "owning constraint"),
        ("option_id", STR, "value used in filter strings (e.g. `SNG`)"),
        ("name", STR, "display name"),
        ("type", STR, "option group (e.g. `Game`, `Format`, `Flag`)"),
        ("description", STR, "description, when served"),
        (
            "children",
            pa.list_(STR),
            "option ids this option stands for (`@children`, comma-separated on the wire); empty when none",
        ),
    ),
    _reference(
        "statistic_definitions",
        "Player and tournament statistic definitions (`*StatisticDefinition`).",
        "one row per snapshot, scope and statistic",
        ("scope", "statistic_id"),
        ("scope", STR, "`player` or `tournament`"),
        ("statistic_id", STR, "statistic id (e.g. `AvROI`)"),
        ("name", STR, "display name"),
        ("type", STR, "value type: Number, Currency, Percentage, Timestamp, String"),
        ("description", STR, "description"),
        codes=(("scope", ("player", "tournament")),),
    ),
    _reference(
        "dataset_definitions",
        "Statistical data set series definitions (`*StatisticalDataSetDefinition/Series`).",
        "one row per snapshot, scope, data set and series",
        ("scope", "dataset", "series"),
        ("scope", STR, "`player` or `tournament`"),
        ("dataset", STR, "data set id (e.g. `ByStake`)"),
        ("x_axis_title", STR, "x axis title"),
        ("x_axis_type", STR, "x axis type (e.g. `Timestamp`, `Number`, `String`)"),
        ("z_axis_title", STR, "z axis title, for two-dimensional sets"),
        ("z_axis_type", STR, "z axis type"),
        ("series", STR, "series id (e.g. `Profit`)"),
        ("series_title", STR, "series title"),
        ("type", STR, "series value type (Number, Currency, Percentage, ...)"),
        codes=(("scope", ("player", "tournament")),),
    ),
    # ------------------------------------------------------------------ countries, news
    _reference(
        "countries",
        "Countries the service recognises (`/metadata/countries`, shape read generically).",
        "one row per snapshot and country",
        ("code",),
        ("code", STR, "country code (from `@code`/`@iso`/`@id`/`Code`, whichever is served)"),
        ("name", STR, "country name (from `@name`/`Name`/the element text)"),
        ("attributes", STR_MAP, "every attribute and text child of the record, as served"),
        ("raw_json", STR, "the record as served (JSON mapping), so nothing is lost"),
    ),
    _reference(
        "news",
        "Product news (`/news/whatsnew`, shape read generically).",
        "one row per snapshot and news item",
        ("item_index",),
        ("item_index", I32, "position of the item in the response"),
        ("news_id", STR, "item id when served (`@id`/`Id`)"),
        ("title", STR, "title (`@title`/`Title`/`@name`)"),
        ("published_at", TS, "publication time (`@date`/`Date`/`@published`, epoch seconds)"),
        ("url", STR, "link, when served"),
        ("body", STR, "text (`Body`/`Text`/`Content`/`Description`/the element text)"),
        ("attributes", STR_MAP, "every attribute and text child of the item, as served"),
        ("raw_json", STR, "the item as served (JSON mapping)"),
    ),
    # ------------------------------------------------------------------ player summaries
    TableSpec(
        "player_snapshots",
        "One harvested player summary (`PlayerResponse/PlayerView/Player`).",
        "one row per snapshot, network, player and filter",
        "snapshot",
        ("network", "player", "filter_name"),
        (
            _SNAP,
            *_summary_key(STR),
            ("filter_expression", STR, "the filter as written in the watchlist; `''` when unfiltered"),
            (
                "filter_sent",
                STR,
                "the filter sent for this night: as written, with its Date anchored to the night (an absolute `Date:start~end` ending at the night's last second)",
            ),
            (
                "filter_window",
                STR,
                "`as_of` (tournaments started up to the end of the night) or `day` (started during the night's UTC day)",
            ),
            ("anchored", BOOL, "true when `filter_sent` cannot select anything started after the night, whenever it is fetched"),
            ("served_filter", STR, "`PlayerView/Filter` as served back; NULL when empty"),
            ("served_name", STR, "`Player/@name` as served (may differ in case from `player`)"),
            ("found", BOOL, "the response held a `Player` element"),
            ("country", STR, "`Player/@country`"),
            ("country_name", STR, "`Player/@countryName`"),
            ("last_activity_at", TS, "`Player/@lastActivity`"),
            ("display_currency", STR, "currency of the money statistics (`Statistics/@displayCurrency`)"),
            ("display_usd_rate", F64, "rate used to convert the money statistics (units per USD)"),
            ("statistic_count", I32, "statistics in the response"),
            ("tournament_count", I32, "recent tournaments in the response"),
            ("server_time", TS, "`Response/@timestamp`"),
            ("metadata_hash", STR, "`Response/@metadataHash`"),
            ("fetched_at", TS, "when the response was received"),
        ),
        codes=(("filter_window", ("as_of", "day")),),
    ),
    TableSpec(
        "player_statistics",
        "Player statistics in long form (`Statistics/Statistic`); ids are open-ended.",
        "one row per snapshot, network, player, filter and statistic",
        "snapshot",
        ("network", "player", "filter_name", "statistic"),
        (
            _SNAP,
            *_summary_key(DSTR),
            ("statistic", STR, "statistic id (`Statistic/@id`, e.g. `AvROI`)"),
            ("type", DSTR, "type from metadata `PlayerStatisticDefinition/@type`; NULL for an id metadata does not define"),
            ("value", STR, "value as served (string); NULL when not authorized"),
            ("value_number", F64, "value as a number when it is one (not for String type)"),
            ("value_time", TS, "value as a time, for Timestamp statistics"),
            ("value_usd", F64, "Currency statistics: value converted from `display_currency` to USD"),
            ("display_currency", DSTR, "currency of Currency statistics"),
            ("authorized", BOOL, 'false when the account may not see this statistic (`@authorized="false"`)'),
            _USD_MISSING,
        ),
    ),
    TableSpec(
        "player_datasets",
        "Statistical data sets in long form (`StatisticalDataSet/Data/Y`).",
        "one row per snapshot, network, player, filter, data set, x (and z) and series",
        "snapshot",
        ("network", "player", "filter_name", "dataset", "x", "z", "series"),
        (
            _SNAP,
            *_summary_key(DSTR),
            ("dataset", DSTR, "data set id (e.g. `ByStake`, `ByMonth`)"),
            ("x", STR, "x value as served (a stake like `USD0.91`, an epoch month, a filter string, ...)"),
            ("x_time", TS, "`x` of a data set whose x axis metadata types `Timestamp` (epoch seconds), else NULL"),
            ("x_number", F64, "`x` of a data set whose x axis metadata types `Number`, else NULL"),
            ("z", STR, "z value for two-dimensional sets (`@z`), else NULL"),
            ("series", STR, "series id (`Y/@id`)"),
            ("type", DSTR, "series type from metadata data set definitions; NULL when unknown"),
            ("value", STR, "value as served"),
            ("value_number", F64, "value as a number"),
            ("value_usd", F64, "Currency series: value converted from `display_currency` to USD"),
            ("display_currency", DSTR, "the summary's display currency"),
            _USD_MISSING,
        ),
        nullable_key=("z",),
    ),
    TableSpec(
        "player_timeline",
        "Timeline events of a summary (`Statistics/Timeline/Event`): achievements and prizes.",
        "one row per snapshot, network, player, filter and event",
        "snapshot",
        ("network", "player", "filter_name", "event_id"),
        (
            _SNAP,
            *_summary_key(STR),
            ("event_id", STR, "`@id`"),
            ("category", STR, "`@category` (e.g. `Achievement`, `Prize`)"),
            ("event_at", TS, "`@date`"),
            ("code", STR, "achievement code"),
            ("name", STR, "achievement name"),
            ("description", STR, "description"),
            ("points", I32, "achievement points"),
            ("priority", I32, "`@priority`"),
            ("is_negative", BOOL, "`@isNegative`"),
            ("game_id", STR, "tournament id of a prize (`@gameID`)"),
            ("tournament_name", STR, "tournament name of a prize"),
            ("position", I32, "finishing position of a prize"),
            ("entrants", I32, "entrants of the prize's tournament"),
            ("currency", STR, "currency of `prize`"),
            ("prize", F64, "prize amount"),
            ("prize_usd", F64, "prize in USD"),
            _USD_MISSING,
            ("url", STR, "`@url`"),
            ("attributes", STR_MAP, "every attribute of the event as served (new fields land here)"),
        ),
    ),
    TableSpec(
        "tournaments",
        "Tournaments seen in recent-tournament lists (`RecentTournaments/Tournament`).",
        "one row per network and tournament id (latest snapshot wins)",
        "dedup",
        ("network", "tournament_id"),
        (
            _SNAP,
            ("network", STR, "network (`@network`)"),
            ("tournament_id", STR, "tournament id (`@id`; a string: ids are opaque)"),
            ("name", STR, "tournament name"),
            ("started_at", TS, "`@date`"),
            ("duration_s", I64, "duration in seconds"),
            ("currency", STR, "currency of every money column of the tournament"),
            ("stake", F64, "stake (buy-in without rake); 0 for a freeroll"),
            (
                "stake_usd",
                F64,
                "stake in USD at the rates of the night that listed it (the models convert at the night the tournament started: `player_results_usd`)",
            ),
            ("rake", F64, "rake (fee)"),
            (
                "rake_usd",
                F64,
                "rake in USD at the rates of the night that listed it (the models convert at the night the tournament started: `player_results_usd`)",
            ),
            ("buy_in", F64, "stake + rake"),
            (
                "buy_in_usd",
                F64,
                "buy-in in USD at the rates of the night that listed it (the models convert at the night the tournament started: `player_results_usd`)",
            ),
            ("prize_pool", F64, "prize pool, when served"),
            (
                "prize_pool_usd",
                F64,
                "prize pool in USD at the rates of the night that listed it (the models convert at the night the tournament started: `player_results_usd`)",
            ),
            ("guarantee", F64, "guaranteed prize pool, when served"),
            (
                "guarantee_usd",
                F64,
                "guarantee in USD at the rates of the night that listed it (the models convert at the night the tournament started: `player_results_usd`)",
            ),
            ("overlay", F64, "overlay, when served"),
            (
                "overlay_usd",
                F64,
                "overlay in USD at the rates of the night that listed it (the models convert at the night the tournament started: `player_results_usd`)",
            ),
            ("re_entries", I32, "re-entries, when served"),
            ("total_entrants", I32, "entrants"),
            ("players_per_table", I32, "seats per table"),
            ("game", STR, "game code (e.g. `H`)"),
            ("game_class", STR, "class (e.g. `sng`, `scheduled`)"),
            ("structure", STR, "betting structure (e.g. `NL`)"),
            ("flags", pa.list_(STR), "flags (`@flags` split on commas, e.g. `[B, T, SO, HU]`)"),
            ("state", STR, "state (e.g. `Completed`)"),
            ("usd_rate", F64, "rate used (units of `currency` per USD): the listing night's"),
            _USD_MISSING,
            ("extra", STR_MAP, "any other attributes, as served"),
            _LISTED_AT,
        ),
    ),
    TableSpec(
        "tournament_entries",
        "A watched player's result in a tournament (`Tournament/TournamentEntry`).",
        "one row per network, tournament id and player (latest snapshot wins)",
        "dedup",
        ("network", "tournament_id", "player"),
        (
            _SNAP,
            ("network", STR, "network"),
            ("tournament_id", STR, "tournament id"),
            ("player", STR, "player (the requested name when the served `@playerName` matches it ignoring case)"),
            ("position", I32, "finishing position"),
            ("cashed", BOOL, "the player won a prize (`@prize` present and > 0)"),
            ("prize", F64, "prize; NULL when the player did not cash (the service sends no `@prize`)"),
            (
                "prize_usd",
                F64,
                "prize in USD at the rates of the night that listed it (the models convert at the night the tournament started: `player_results_usd`)",
            ),
            ("multientries", I32, "the player's re-entries (`@multientries`), when served"),
            ("currency", STR, "tournament currency"),
            ("stake", F64, "tournament stake"),
            ("rake", F64, "tournament rake"),
            ("profit", F64, "prize − stake − rake (prize 0 when not cashed)"),
            (
                "profit_usd",
                F64,
                "profit in USD at the rates of the night that listed it (the models convert at the night the tournament started: `player_results_usd`)",
            ),
            ("usd_rate", F64, "rate used (units of `currency` per USD): the listing night's"),
            _USD_MISSING,
            _LISTED_AT,
        ),
    ),
    # ------------------------------------------------------------------ the budget ledger
    TableSpec(
        "coverage_changes",
        "What the service stopped (or started) showing since the lake's earlier nights (`tourneylake.tables.coverage`): "
        "a network gone from (or new in) metadata, a watched player no longer found, statistics no longer (or again) "
        "authorized (a player who opted out). Earlier nights keep their rows; this says what changed.",
        "one row per night, subject (network or player pair) and change",
        "snapshot",
        ("subject", "network", "player", "filter_name", "change"),
        (
            _SNAP,
            ("subject", STR, "`network` (a metadata change) or `player` (a watched (player, filter) pair)"),
            ("network", STR, "network (metadata `Network/@name`)"),
            ("player", STR, "player as watched; `''` for a network"),
            ("filter_name", STR, "watchlist filter name; `''` unfiltered or for a network"),
            (
                "change",
                STR,
                "`network_removed`, `network_added`, `player_not_found` (the lake has an earlier snapshot), "
                "`statistics_withheld` (authorized before, not now: every one when the player opted out), `statistics_restored`",
            ),
            ("last_seen", DATE, "the earlier night compared with: the last metadata, or the pair's last snapshot"),
            ("statistics", pa.list_(STR), "the statistics withheld or restored; NULL for other changes"),
            ("detail", STR, "the change in a sentence"),
        ),
        codes=(
            ("subject", ("network", "player")),
            ("change", ("network_removed", "network_added", "player_not_found", "statistics_withheld", "statistics_restored")),
        ),
    ),
    TableSpec(
        "search_ledger",
        "Every metered call attempt, and every charge the service counted that no answer explains (`tourneylake.lake.ledger`). `sum(cost)` per night is the night's bill.",
        "one row per metered call attempt or reconciliation",
        "whole",
        ("run_id", "called_at", "resource", "network", "player", "filter_name", "attempt"),
        (
            _SNAP,
            ("called_at", pa.timestamp("us", tz="UTC"), "when the attempt started (for a reconciliation: when it was made)"),
            ("run_id", STR, "run that made the call"),
            ("resource", STR, "resource (`player_summary`, `nlq`, `hand_analysis`), or `unattributed` for a reconciliation"),
            ("network", STR, "network, for player resources"),
            ("player", STR, "player, for player resources"),
            ("filter_name", STR, "watchlist filter name; `''` unfiltered"),
            ("filter_expression", STR, "the filter sent (anchored to the night; see `player_snapshots.filter_sent`)"),
            ("question", STR, "natural-language question, for the NLQ resource"),
            ("attempt", I32, "attempt number of the call (retries count up from 1; 0 for a reconciliation)"),
            ("cost", I32, "searches spent"),
            (
                "remaining_after",
                I64,
                "the account's searches left after the call (a logged-in `UserInfo/RemainingSearches`), when known",
            ),
            (
                "outcome",
                STR,
                "`ok`, `service_error`, `transport_error`, `malformed_response` (cut short), `unusable_response` (complete, unreadable), `malformed_call`; for a reconciliation "
                "`reconciled` (counted at the end of the run) or `reconciled_after_crash` (calls in flight when a run died); `not_charged` (a negative cost: what the rows booked that the service did not count, lookups without data it let off); `external_spending` (cost 0: another client of the account spent searches during the run)",
            ),
            ("error_code", I64, "`Error/@id` when the service refused"),
            ("error", STR, "error text (English), never credentials"),
            ("duration_ms", F64, "wall time of the attempt"),
            ("account", STR, "the account's name (never its secret) when the run named one; NULL otherwise"),
            (
                "quota_day",
                DATE,
                "the service's quota day the search was paid from (the date of the daily reset that began it, `TOURNEYLAKE_QUOTA_RESET_UTC`): "
                "`sum(cost)` per `quota_day` is what the service counted that day, per `snapshot_date` what the night's data cost, "
                "whenever it was fetched (a pair owed to an earlier night is booked to that night)",
            ),
        ),
        codes=(
            (
                "outcome",
                (
                    "ok",
                    "service_error",
                    "transport_error",
                    "malformed_response",
                    "unusable_response",
                    "malformed_call",
                    "reconciled",
                    "reconciled_after_crash",
                    "not_charged",
                    "external_spending",
                ),
            ),
        ),
        nullable_key=("network", "player", "filter_name"),
    ),
]

TABLES: dict[str, TableSpec] = {spec.name: spec for spec in _SPECS}
SCHEMAS: dict[str, pa.Schema] = {spec.name: spec.schema for spec in _SPECS}


def duckdb_type(dtype: pa.DataType) -> str:
    """The DuckDB type of an Arrow column type (the warehouse DDL and the docs use it)."""
    if pa.types.is_timestamp(dtype) and dtype.tz == "UTC":
        return "TIMESTAMPTZ"
    if dtype == DSTR:
        return "VARCHAR"
    if dtype == STR_MAP:
        return "MAP(VARCHAR, VARCHAR)"
    names = {STR: "VARCHAR", F64: "DOUBLE", I64: "BIGINT", I32: "INTEGER", BOOL: "BOOLEAN", DATE: "DATE"}
    if dtype in names:
        return names[dtype]
    if pa.types.is_list(dtype):
        return duckdb_type(dtype.value_type) + "[]"
    if pa.types.is_struct(dtype):
        return "STRUCT(" + ", ".join(f"{f.name} {duckdb_type(f.type)}" for f in dtype) + ")"
    return str(dtype)


def tables_markdown() -> str:
    """The tables reference of the docs (``scripts/docs_reference.py``)."""
    out: list[str] = ["# Tables", ""]
    for spec in _SPECS:
        out += [
            f"## `{spec.name}`",
            "",
            f"{spec.doc} Grain: {spec.grain}. Key: `{', '.join(spec.key)}`. Warehouse load: {spec.load}.",
            "",
            "| column | type | meaning |",
            "|---|---|---|",
        ]
        out += [f"| `{n}` | {duckdb_type(t)} | {d} |" for n, t, d in spec.columns]
        out.append("")
    return "\n".join(out)
