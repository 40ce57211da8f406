"""A night's tables from its raw answers: the one normalisation path, no network.

The harvest and the rebuild both make a night's tables here, from the same inputs (the night's
accepted raw answers and its own reference data), so a rebuild is identical to the original
night by construction and a normaliser fix reaches years of history at no cost:
:func:`metadata_tables` (an answer saying "your copy is current" resolved to the full answer it
confirmed, normalised again under this night, so every night holds its own rates),
:func:`free_table` (countries, news), :class:`SummarySink` (player summaries into the six summary
tables, a batch at a time; an answer the normaliser refuses is marked ``unusable`` in the raw
store and read again by every later pass; :class:`ShardSink`, one account's among several, into
its shard's parts of the night, which :func:`join_shards` makes the night's once all are in),
:func:`settle_received` (bodies a killed process saved but never read), and the whole night:
:func:`reference_tables`, :func:`player_tables`. A key listed differently by several summaries
of a night keeps one row chosen by content (:func:`keep_one_row_per_key`), never by the order the
answers were read in, so a harvest, a rebuild and shards side by side agree.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from tourneylake.api import calls
from tourneylake.api.answers import metadata_is_cached, read_answer
from tourneylake.api.envelope import service_error
from tourneylake.api.errors import NOT_FOUND_CODES, MalformedResponse, UnusableResponse
from tourneylake.api.tree import MalformedPayload, Node, parse
from tourneylake.lake.lake import Lake
from tourneylake.lake.ledger import Ledger
from tourneylake.lake.raw import MALFORMED, OK, RECEIVED, UNUSABLE, RawResponse, key_digest, read_raws
from tourneylake.lake.segments import RawRef
from tourneylake.lake.storage import atomic_write
from tourneylake.lake.table_writers import NightWriter, ShardWriter, finish_together, part_shard
from tourneylake.runtime import collector
from tourneylake.schemas import TABLES
from tourneylake.tables.normalize import normalize_countries, normalize_metadata, normalize_news
from tourneylake.tables.normalize.summary import SUMMARY_TABLES, SummaryNormalizer
from tourneylake.tables.reference import InForce

#: What a normaliser or reader raises for an answer it cannot read (never for a bug of ours).
UNREADABLE = (MalformedPayload, MalformedResponse, UnusableResponse)

if TYPE_CHECKING:
    from tourneylake.api.client import ApiResponse

__all__ = [
    "FREE_RESOURCES",
    "UNREADABLE",
    "MetadataTables",
    "ShardSink",
    "StoredSummaries",
    "SummarySink",
    "TargetKey",
    "free_table",
    "join_shards",
    "keep_one_row_per_key",
    "mark_shard",
    "metadata_tables",
    "not_found_targets",
    "player_tables",
    "rebuild_night",
    "reference_data",
    "reference_tables",
    "settle_received",
    "stored_summary_refs",
    "stored_targets",
    "summary_labels",
    "target_key",
    "target_name",
    "unmark_shard",
    "write_reference_tables",
]

log = logging.getLogger(__name__)

#: Free resources kept as tables: resource → (table, the call whose answer the table holds).
FREE_RESOURCES: dict[str, tuple[str, calls.Call]] = {
    calls.COUNTRIES: ("countries", calls.countries()),
    calls.WHATS_NEW: ("news", calls.whats_new()),
}
_NORMALIZERS = {"countries": normalize_countries, "news": normalize_news}

#: (network, player, filter name; ``""`` unfiltered): one summary per night.
TargetKey = tuple[str, str, str]


def body_status(raw: RawResponse) -> str:
    """What a stored body is, read from its envelope: ``ok``, ``refused-<code>``, ``malformed``
    (cut short) or ``unusable`` (complete, unreadable) — what the client would have said."""
    try:
        root, envelope = read_answer(raw.body, raw.fmt, raw.resource)
    except MalformedResponse:
        return MALFORMED
    except UnusableResponse:
        return UNUSABLE
    return OK if envelope.success else f"refused-{service_error(root, envelope, raw.resource).code}"


def settle_received(lake: Lake, night: date, resource: str | None = None, key: Mapping[str, str] | None = None) -> int:
    """Give every body of the night still marked ``received`` (its process died before reading
    it) its real status, or only those of ``resource`` (and of the request ``key``); returns how
    many were settled."""
    if key is None:
        refs = lake.raw.refs(night, resource, status=RECEIVED)
    else:
        assert resource is not None, "a request's key goes with its resource"
        refs = lake.raw.request_refs(night, resource, key, RECEIVED)
    for raw in read_raws(refs):
        lake.raw.settle(raw.ref, body_status(raw))
    return len(refs)


# ---------------------------------------------------------------------------------- metadata


@dataclass(frozen=True)
class MetadataTables:
    tables: dict[str, pa.Table]
    metadata_hash: str | None
    downloaded: bool  # the night's own answer was the full metadata (not "your copy is current")


def _latest(raws: list[RawResponse]) -> RawResponse | None:
    return max(raws, key=lambda raw: raw.fetched_at) if raws else None


def metadata_tables(lake: Lake, night: date) -> MetadataTables | None:
    """The night's metadata tables from its latest accepted metadata answer; ``None`` when the
    night has none, or when it confirmed a copy whose full answer the lake no longer holds."""
    own = _latest(list(lake.raw.bodies(night, calls.METADATA)))
    if own is None:
        return None
    root = parse(own.body, own.fmt)
    metadata_hash = root.attr("metadataHash")
    if not metadata_is_cached(root):
        return MetadataTables(normalize_metadata(root, night), metadata_hash, True)
    for earlier in sorted((d for d in lake.raw.nights() if d < night), reverse=True):
        for raw in lake.raw.bodies(earlier, calls.METADATA):
            candidate = parse(raw.body, raw.fmt)
            if candidate.attr("metadataHash") == metadata_hash and not metadata_is_cached(candidate):
                return MetadataTables(normalize_metadata(candidate, night), metadata_hash, False)
    log.warning(
        "night %s: the metadata answer confirmed hash %s, but no full answer with it is in the lake", night, metadata_hash
    )
    return None


# ---------------------------------------------------------------------------------- free resources


def free_table(lake: Lake, night: date, resource: str) -> tuple[pa.Table, list[str]] | None:
    """Countries or news of the night from its accepted answer (``None``: none stored)."""
    table, call = FREE_RESOURCES[resource]
    raw = lake.raw.read(night, resource, call.key)
    if raw is None:
        return None
    result = _NORMALIZERS[table](parse(raw.body, raw.fmt), night)
    return result.table, list(result.warnings)


# ---------------------------------------------------------------------------------- summaries


def summary_labels(key: dict[str, str]) -> dict[str, Any]:
    """What a summary's raw key says about it, as :meth:`SummaryNormalizer.add` takes it (keys
    written before filters were anchored lack ``written``/``window``/``anchored``)."""
    sent = key.get("filter", "")
    return {
        "network": key["network"],
        "player": key["player"],
        "filter_name": key.get("filter_name") or None,
        "filter_expression": key.get("written", sent),
        "filter_sent": sent,
        "window": key.get("window", "as_of"),
        "anchored": key.get("anchored") == "true",
    }


def target_key(key: dict[str, str]) -> TargetKey:
    return (key["network"], key["player"], key.get("filter_name") or "")


def stored_targets(lake: Lake, night: date) -> set[TargetKey]:
    """The targets whose summary the night already holds (paid for, accepted), or that the
    service answered "not found" (which it charges for: asking again would pay again)."""
    return {target_key(raw.key) for raw in lake.raw.bodies(night, calls.PLAYER_SUMMARY)} | not_found_targets(lake, night)


def unusable_targets(lake: Lake, night: date) -> set[TargetKey]:
    """The targets whose answer tonight is complete but unreadable: paid for, and asking again
    would pay again for the same answer, so they are not asked again tonight."""
    return {target_key(raw.key) for raw in lake.raw.bodies(night, calls.PLAYER_SUMMARY, status=UNUSABLE)}


def not_found_targets(lake: Lake, night: date) -> set[TargetKey]:
    """The targets the service answered "not found" tonight (any of ``NOT_FOUND_CODES``)."""
    found: set[TargetKey] = set()
    for code in NOT_FOUND_CODES:
        found.update(target_key(raw.key) for raw in lake.raw.bodies(night, calls.PLAYER_SUMMARY, status=f"refused-{code}"))
    return found


@dataclass
class StoredSummaries:
    """What a night's stored summaries gave: the targets normalised, and those whose answer
    cannot be read (target → why); ``not_found``: those the service answered "not found", when
    the sink knows them (a shard, from its own answers), else ``None``."""

    done: set[TargetKey] = field(default_factory=set)
    unusable: dict[TargetKey, str] = field(default_factory=dict)
    not_found: set[TargetKey] | None = None


def target_name(target: TargetKey) -> str:
    """A target as people read it: ``network/player`` and ``[filter]`` when filtered (as
    :class:`tourneylake.night.budget.Target` prints itself)."""
    network, player, filter_name = target
    return f"{network}/{player}" + (f" [{filter_name}]" if filter_name else "")


def summary_name(key: dict[str, str]) -> str:
    """A summary's target as people read it, from its raw key."""
    return target_name(target_key(key))


def stored_summary_refs(lake: Lake, night: date) -> list[RawRef]:
    """The night's stored summaries a rebuild reads: the accepted answers, then those marked
    unusable (a target read since skips its older unusable answer)."""
    return [
        *lake.raw.refs(night, calls.PLAYER_SUMMARY),
        *lake.raw.refs(night, calls.PLAYER_SUMMARY, status=UNUSABLE),
    ]


class SummarySink:
    """Normalised summaries → the night's six summary tables, a part file every ``batch_size``
    summaries (memory stays flat). Partitions are swapped in when ``stack`` closes without error.
    A harvest's sink in process (see ``night.harvest.Sink``)."""

    #: A harvest hands this sink each answer's tree (parsed once, by the client).
    needs_tree = True
    #: The shard whose parts of the night this sink commits (``None``: the night, whole).
    shard: str | None = None

    def __init__(self, lake: Lake, night: date, in_force: InForce, stack: ExitStack, batch_size: int = 500) -> None:
        self.lake = lake
        self.night = night
        self.stack = stack
        self.batch_size = batch_size
        self.normalizer = SummaryNormalizer(
            night, in_force.rates, in_force.statistic_types, in_force.series_types, in_force.axis_types
        )
        self.writers: dict[str, NightWriter | ShardWriter] = {}
        # The tables are committed together when the stack closes (side by side: one table each).
        stack.push(lambda exc_type, exc, tb: finish_together(list(self.writers.values()), exc_type))
        self.pending = 0
        self.rows: dict[str, int] = {}
        self.rejected: list[tuple[TargetKey, str]] = []  # refused later: never here (see `reject`)

    def take(self, answer: ApiResponse, key: dict[str, str]) -> None:
        """A fetched answer, normalised now (see :meth:`add`)."""
        self.add(answer.root, key, answer.fetched_at)

    def expect(self, answers: int) -> None:
        """Nothing to prepare: answers are normalised as they come."""

    def own(self, requests: list[dict[str, str]]) -> None:
        """Every stored answer of the night is this sink's: nothing to note."""

    def add(self, root: Node, key: dict[str, str], fetched_at: datetime) -> None:
        """Normalise one accepted answer. An answer the normaliser cannot read raises
        :class:`MalformedPayload` and leaves the batch as it was: see :meth:`reject`."""
        self.normalizer.add(root, fetched_at=fetched_at, **summary_labels(key))
        self.pending += 1
        if self.pending >= self.batch_size:
            self.flush()

    def reject(self, key: dict[str, str], reason: str) -> None:
        """Mark tonight's accepted answer for ``key`` unusable in the raw store (it stays there:
        a rebuild with a fixed normaliser reads it again)."""
        # Its status may not be stored yet (on an object store a harvest does not wait for it):
        # then it is still `received`, its latest one of them.
        refs = (
            self.lake.raw.request_refs(self.night, calls.PLAYER_SUMMARY, key, OK)
            or sorted(
                self.lake.raw.request_refs(self.night, calls.PLAYER_SUMMARY, key, RECEIVED), key=lambda ref: ref.fetched_at
            )[-1:]
        )
        for ref in refs:
            self.lake.raw.settle(ref, UNUSABLE)
        log.warning("night %s: the answer for %s cannot be read and is kept raw: %s", self.night, summary_name(key), reason)

    def add_stored(self) -> StoredSummaries:
        """Normalise the summaries already paid for tonight (zero searches), those marked
        unusable included (the normaliser may have been fixed since)."""
        with collector.paused():  # the answers' trees hold no cycles: the collector's passes would find nothing
            return self._add_stored()

    def _add_stored(self) -> StoredSummaries:
        # Listed first (the loop names some anew), then read a batch at a time: a night's bodies
        # are never all in memory at once, and reading a batch before parsing it is faster than
        # alternating body by body.
        return self.add_refs(stored_summary_refs(self.lake, self.night), StoredSummaries())

    def add_refs(self, refs: list[RawRef], stored: StoredSummaries) -> StoredSummaries:
        """Normalise the stored answers ``refs`` name, in their order, into ``stored``: read a
        batch at a time (reading a batch before parsing it is faster than body by body)."""
        bodies = read_raws(refs)
        for start in range(0, len(refs), self.batch_size):
            self.add_raws([next(bodies) for _ in refs[start : start + self.batch_size]], stored)
        return stored

    def add_raws(self, raws: Iterable[RawResponse], stored: StoredSummaries) -> StoredSummaries:
        """Normalise stored answers already read, in their order, into ``stored``."""
        for raw in raws:
            self._add_stored_one(raw, stored)
        return stored

    def settle(self, ref: RawRef, status: str) -> None:
        """A stored answer found to have another status (read now, or unreadable)."""
        self.lake.raw.settle(ref, status)

    def _add_stored_one(self, raw: RawResponse, stored: StoredSummaries) -> None:
        target = target_key(raw.key)
        if target in stored.done:
            return  # an unusable older answer of a target read since
        try:
            root, envelope = read_answer(raw.body, raw.fmt, raw.resource)
            if not envelope.success:
                raise UnusableResponse("the stored answer is a refusal")
            self.add(root, raw.key, raw.fetched_at)
        except UNREADABLE as exc:
            if raw.status == OK:
                self.settle(raw.ref, UNUSABLE)
            stored.unusable[target] = str(exc)
            return
        if raw.status == UNUSABLE:
            self.settle(raw.ref, OK)
            log.info("night %s: the answer for %s, unusable before, is read now", self.night, summary_name(raw.key))
        stored.unusable.pop(target, None)
        stored.done.add(target)

    @property
    def repeating(self) -> set[str]:
        """The deduplicated tables of which the night's normaliser kept a key twice (see
        :func:`keep_one_row_per_key`)."""
        return self.normalizer.repeating

    def flush(self) -> None:
        self.pending = 0
        for name, table in self.normalizer.flush().items():
            self.write(name, table)

    def write(self, name: str, table: pa.Table) -> None:
        """Rows of the night's ``name`` table as a part (none when there are none)."""
        if table.num_rows == 0:
            return
        writer = self.writers.get(name)
        if writer is None:
            writer = self.writers[name] = self.lake.tables.writer(name, self.night, shard=self.shard).__enter__()
        writer.write(table)
        self.rows[name] = self.rows.get(name, 0) + table.num_rows


class ShardSink(SummarySink):
    """One shard's summaries (an account's, beside the others) → its shard's parts of the
    night's tables (shard commits: :class:`~tourneylake.lake.table_writers.ShardWriter`), made
    the night's by :func:`join_shards` once every shard is in. Of the answers stored tonight it
    reads only its own requests' (:meth:`own`), found by their index entries: never another
    shard's bodies. Every summary table gets its commit, so a table with no rows tonight drops
    what the shard committed to it before."""

    def __init__(self, lake: Lake, night: date, in_force: InForce, stack: ExitStack, shard: str, batch_size: int = 500) -> None:
        super().__init__(lake, night, in_force, stack, batch_size)
        self.shard = shard
        self._mine: dict[str, TargetKey] = {}  # key digest → target, of tonight's requests
        stack.push(self._every_table)  # runs before the commits the sink pushed first

    def _every_table(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if exc_type is None:
            for name in SUMMARY_TABLES:
                if name not in self.writers:
                    self.writers[name] = self.lake.tables.writer(name, self.night, shard=self.shard).__enter__()

    def own(self, requests: list[dict[str, str]]) -> None:
        self._mine = {key_digest(key): target_key(key) for key in requests}

    def _add_stored(self) -> StoredSummaries:
        stored = StoredSummaries(not_found=set())
        not_found = {f"refused-{code}" for code in NOT_FOUND_CODES}
        refs = []
        for ref in self.lake.raw.refs(self.night, calls.PLAYER_SUMMARY, status=None):
            target = self._mine.get(ref.digest)
            if target is None:
                continue  # another shard's (or a request not asked tonight)
            if ref.status in (OK, UNUSABLE):
                refs.append(ref)
            elif ref.status in not_found:
                stored.not_found.add(target)  # type: ignore[union-attr]
        refs.sort(key=lambda ref: ref.status != OK)  # accepted answers first, as the night's sink reads them
        return self.add_refs(refs, stored)


def mark_shard(lake: Lake, night: date, shard: str, shares: str, rows: Mapping[str, int]) -> None:
    """Say a shard's parts of the night are in (written after their commits), made from the
    player split ``shares`` (a digest: :func:`tourneylake.night.accounts.shares_digest`)."""
    content = {"shares": shares, "rows": dict(rows), "at": datetime.now(UTC).isoformat(timespec="seconds")}
    atomic_write(lake.tables.shard_mark(night, shard), orjson.dumps(content), fsync=lake.fsync)


def unmark_shard(lake: Lake, night: date, shard: str) -> None:
    """A shard's harvest begins: its parts of the night are not in until it marks them again
    (a harvest that fails leaves the night to be made from the raw answers)."""
    mark = lake.tables.shard_mark(night, shard)
    if mark.exists():
        mark.unlink()


def _marked_split(lake: Lake, night: date, shard: str) -> str | None:
    try:
        made_from = orjson.loads(lake.tables.shard_mark(night, shard).read_bytes()).get("shares")
    except (FileNotFoundError, orjson.JSONDecodeError, AttributeError):
        return None
    return made_from if isinstance(made_from, str) else None


def join_shards(lake: Lake, night: date, shares: str, shards: list[str], unusable: list[str] | None = None) -> dict[str, int]:
    """The night's summary tables made once all shards are in: each table keeps the parts of
    these shards (made from the same player split ``shares``) and no other, one row per key
    (:func:`_join_table`), and the ledger is published; no raw answer is read. When a shard's
    parts are missing or of another split (it failed, or the night was rebuilt since), the night
    is made from every raw answer instead (:func:`player_tables`). Returns the night's rows per table."""
    for shard in shards:
        if _marked_split(lake, night, shard) != shares:
            log.info("night %s: shard %s has no parts of this player split: the night is made from its raw answers", night, shard)
            return player_tables(lake, night, unusable)
    rows = {name: kept for name in SUMMARY_TABLES if (kept := _join_table(lake, night, name, frozenset(shards)))}
    if published := Ledger(lake).publish(night, when_empty=False):
        rows["search_ledger"] = published
    return rows


def _join_table(lake: Lake, night: date, table: str, shards: frozenset[str]) -> int:
    """One table's night made of ``shards``' parts in one commit (none when nothing changes): the
    parts of the night written whole or of other shards dropped, and, in a deduplicated table,
    the rows another shard's row of their key wins over (:func:`one_row_per_key`'s choice) left
    out of their shard's parts, which are written again. Returns the night's rows."""
    from tourneylake.tables.warehouse import rows_not_kept

    parts = lake.tables.shard_parts(table, night)
    ours = [(path, rows) for shard in sorted(shards) for path, rows in parts.get(shard, [])]
    lost = rows_not_kept(lake, table, night, [path for path, _ in ours]) if TABLES[table].load == "dedup" else {}
    rewritten = {shard for path in lost if (shard := part_shard(path)) is not None}
    total = sum(rows or 0 for path, rows in ours) - sum(len(numbers) for numbers in lost.values())
    if not rewritten and set(parts) <= shards:
        return total
    with lake.tables.shard_writer(table, night, keep_shards=shards - rewritten) as writer:
        for path, _ in ours:
            if part_shard(path) in rewritten:
                part = lake.tables.read_parts(night, [path])
                if numbers := lost.get(path):
                    part = part.filter(pc.invert(pc.is_in(pa.array(range(part.num_rows)), pa.array(numbers))))
                if part.num_rows:
                    writer.write(part, shard=part_shard(path))
    return total


# ------------------------------------------------------------------------------ a whole night


def rebuild_night(lake: Lake, night: date, unusable: list[str] | None = None) -> dict[str, int]:
    """Every table of one night from its raw answers; returns rows written per table. Answers
    that still cannot be read are appended to ``unusable`` (they stay in the lake, marked)."""
    rows = reference_tables(lake, night)
    rows.update(player_tables(lake, night, unusable))
    return rows


def reference_tables(lake: Lake, night: date) -> dict[str, int]:
    """The night's raw answers settled, and its metadata, countries and news tables; returns
    rows written per table. A night reads earlier nights here (the metadata it confirmed
    unchanged is an earlier night's answer; a night without metadata uses the latest earlier
    tables), so nights go through this step in order; their player tables then read only
    their own night's answers and these tables."""
    return write_reference_tables(lake, night, reference_data(lake, night))


def reference_data(lake: Lake, night: date) -> dict[str, pa.Table]:
    """The night's raw answers settled, and its metadata, countries and news tables as made
    from them (not written: see :func:`write_reference_tables`)."""
    settle_received(lake, night)
    metadata = metadata_tables(lake, night)
    tables = dict(metadata.tables) if metadata is not None else {}
    for resource in FREE_RESOURCES:
        found = free_table(lake, night, resource)
        if found is not None:
            tables[FREE_RESOURCES[resource][0]] = found[0]
    return tables


def write_reference_tables(lake: Lake, night: date, tables: Mapping[str, pa.Table]) -> dict[str, int]:
    """The night's reference tables written (currencies last: its night says the others' are in);
    rows written per table."""
    return lake.tables.write_night(night, tables, last="currencies")


def keep_one_row_per_key(lake: Lake, night: date, repeating: Collection[str] | None = None) -> dict[str, int]:
    """The night's deduplicated tables (tournaments, entries) with one row per key, chosen by
    content (:func:`~tourneylake.tables.warehouse.one_row_per_key`): each night that lists a key
    twice (answers that disagree) replaced whole; returns the rows of those replaced.
    ``repeating``: the tables of which the normaliser that wrote the night kept a key twice (see
    :attr:`SummarySink.repeating`): the others hold each key once and are not read back (``None``:
    not known, each is read)."""
    from tourneylake.tables.warehouse import one_row_per_key

    rows: dict[str, int] = {}
    for name in SUMMARY_TABLES:
        if repeating is not None and name not in repeating:
            continue
        if TABLES[name].load == "dedup" and (kept := one_row_per_key(lake, name, night)) is not None:
            rows[name] = lake.tables.write(name, night, kept)
    return rows


def player_tables(
    lake: Lake,
    night: date,
    unusable: list[str] | None = None,
    *,
    in_force: InForce | None = None,
    read_stored: Callable[[SummarySink], StoredSummaries] | None = None,
    before_commit: Callable[[], object] | None = None,
) -> dict[str, int]:
    """The night's six summary tables and its ``search_ledger`` export from the raw answers and
    the ledger (what several accounts' harvests make together, and part of every rebuild);
    returns rows written per table. Answers that cannot be read go to ``unusable``.
    ``read_stored``: reads the night's stored summaries into the sink (by default
    :meth:`SummarySink.add_stored`, all in this process; :mod:`.split_night` shares them with a
    forked process); ``before_commit``: called before the tables are committed (whether or not
    they are)."""
    unusable = [] if unusable is None else unusable
    rows: dict[str, int] = {}
    with ExitStack() as stack:
        sink = SummarySink(lake, night, in_force or InForce(lake, night), stack)
        if before_commit is not None:
            stack.callback(before_commit)  # runs before the sink's commits (pushed earlier)
        stored = sink.add_stored() if read_stored is None else read_stored(sink)
        for target, why in stored.unusable.items():
            unusable.append(f"{night} {target_name(target)}: {why}")
        if stored.done:
            sink.flush()
            for name in SUMMARY_TABLES:  # a table with no rows tonight has no partition
                if name not in sink.rows:
                    lake.tables.drop(name, night)
        rows.update(sink.rows)
    rows.update(keep_one_row_per_key(lake, night, sink.repeating))
    lake.tables.drop_shard_marks(night)  # the night written whole: no shard's parts are in any more
    if published := Ledger(lake).publish(night, when_empty=False):
        rows["search_ledger"] = published
    return rows
