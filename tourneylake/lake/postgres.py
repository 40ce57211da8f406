"""A lake's shared state in PostgreSQL, for workers on several machines (``TOURNEYLAKE_STATE_URL``).

Without it the lake keeps its state in files (``_ledger/``, ``_state/``, ``flock``-ed locks):
right on one machine. With it, what several workers must agree on lives here instead: the
lake's locks (session advisory locks, which the server drops when the holder's connection dies),
small documents (cost votes, the question cache, the backlog of pairs owed, the night's player
split), and the search ledger (a run's lines, each committed before the call it announces goes
out). A run is held by an advisory lock on its writer's connection, so a dead worker on any
machine is found by taking that lock, never by a host or a pid. Rows are keyed by the lake (its
data directory as given: every worker names it alike), so one database serves several lakes.
The URL bears a password: it is never logged, stored or repeated in an error.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import date, datetime
from typing import Any

import orjson

from tourneylake.errors import LakeError, one_line

__all__ = ["LeaseLost", "RunLease", "SharedState", "StateUnreachable", "shared_state", "shown_url"]

log = logging.getLogger(__name__)

#: How long a writer whose connection dropped (a server restart) tries to reconnect before its
#: next line fails (and the run stops paying for calls), seconds.
RECONNECT_S = 30.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tourneylake_runs (
    lake text NOT NULL, run_id text NOT NULL, night date NOT NULL, header jsonb NOT NULL,
    closed boolean NOT NULL DEFAULT false, written_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (lake, run_id)
);
CREATE INDEX IF NOT EXISTS tourneylake_runs_night ON tourneylake_runs (lake, night);
CREATE INDEX IF NOT EXISTS tourneylake_runs_open ON tourneylake_runs (lake) WHERE NOT closed;
CREATE TABLE IF NOT EXISTS tourneylake_ledger_lines (
    lake text NOT NULL, run_id text NOT NULL, seq integer NOT NULL, line jsonb NOT NULL, called_at timestamptz,
    PRIMARY KEY (lake, run_id, seq)
);
CREATE INDEX IF NOT EXISTS tourneylake_ledger_called ON tourneylake_ledger_lines (lake, called_at);
CREATE TABLE IF NOT EXISTS tourneylake_documents (
    lake text NOT NULL, name text NOT NULL, value jsonb NOT NULL, PRIMARY KEY (lake, name)
);
CREATE TABLE IF NOT EXISTS tourneylake_locks (lake text NOT NULL, name text NOT NULL, PRIMARY KEY (lake, name));
"""


class StateUnreachable(LakeError):
    """The state database cannot be reached (down, restarting, refused the login)."""


class LeaseLost(LakeError):
    """A run's ledger is held by another process (a reconciler took it): its writer stops."""


def shown_url(url: str) -> str:
    """The URL as it may be printed: no password."""
    try:
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        params = conninfo_to_dict(url)
    except Exception:  # noqa: BLE001 - whatever it is, it is not shown
        return "the state database (TOURNEYLAKE_STATE_URL)"
    params.pop("password", None)
    return make_conninfo("", **{k: v for k, v in params.items() if v is not None})


def _key(*parts: str) -> int:
    """A signed 64-bit advisory lock key."""
    return int.from_bytes(hashlib.blake2b("\x1f".join(parts).encode(), digest_size=8).digest(), "big", signed=True)


def _jsonable(line: Mapping[str, Any]) -> Any:
    return orjson.loads(orjson.dumps(line, option=orjson.OPT_NAIVE_UTC))


class SharedState:
    """One lake's state in one PostgreSQL database (see the module docstring). Thread-safe:
    short statements share one connection under a lock; a lock held, or a run written, has a
    connection of its own (its session is what holds it)."""

    def __init__(self, url: str, lake: str) -> None:
        self._url = url
        self.lake = lake
        self._conn: Any = None
        self._guard = threading.Lock()

    def __repr__(self) -> str:
        return f"SharedState({self.shown!r}, lake={self.lake!r})"

    @property
    def shown(self) -> str:
        return shown_url(self._url)

    def _failure(self, exc: BaseException, what: str) -> LakeError:
        text = one_line(exc).replace(self._url, self.shown)
        return LakeError(f"{what}: the state database {self.shown} failed ({text})")

    def connect(self) -> Any:
        """A new autocommit connection (the schema made on first use in this process)."""
        import psycopg

        try:
            conn = psycopg.connect(self._url, autocommit=True, connect_timeout=10)
        except psycopg.Error as exc:
            failure = self._failure(exc, "cannot connect")
            raise StateUnreachable(str(failure)) from None
        _ensure_schema(self._url, conn)
        return conn

    def execute(self, sql: str, params: tuple[Any, ...] = (), *, what: str = "state") -> list[tuple[Any, ...]]:
        """One statement on the shared connection (reconnected once if it dropped); its rows."""
        import psycopg

        with self._guard:
            for attempt in (1, 2):
                try:
                    if self._conn is None or self._conn.closed:
                        self._conn = self.connect()
                    cursor = self._conn.execute(sql, params)
                    return cursor.fetchall() if cursor.description else []
                except psycopg.OperationalError as exc:
                    self._conn = None
                    if attempt == 2:
                        raise self._failure(exc, what) from None
                except psycopg.Error as exc:
                    raise self._failure(exc, what) from None
        raise AssertionError("unreachable")

    @contextlib.contextmanager
    def transaction(self, *, what: str = "state") -> Iterator[Any]:
        """A connection of its own inside one transaction (committed when the block ends)."""
        import psycopg

        conn = self.connect()
        try:
            with conn.transaction():
                yield conn
        except psycopg.Error as exc:
            raise self._failure(exc, what) from None
        finally:
            conn.close()

    # ------------------------------------------------------------------ locks
    @contextlib.contextmanager
    def lock(self, name: str, *, wait: bool = True) -> Iterator[bool]:
        """An advisory lock held by a connection of its own for the block (see ``LakeLocks.hold``)."""
        self.execute("INSERT INTO tourneylake_locks (lake, name) VALUES (%s, %s) ON CONFLICT DO NOTHING", (self.lake, name))
        conn = self.connect()
        try:
            key = _key(self.lake, "lock", name)
            held = bool(conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0])
            if not held and wait:
                log.info("another process holds the lake's lock %s: waiting for it to finish", name)
                conn.execute("SELECT pg_advisory_lock(%s)", (key,))
                held = True
            yield held
        finally:
            conn.close()  # the session's locks go with it

    def lock_names(self, prefix: str) -> list[str]:
        rows = self.execute(
            "SELECT name FROM tourneylake_locks WHERE lake = %s AND starts_with(name, %s) ORDER BY name", (self.lake, prefix)
        )
        return [row[0] for row in rows]

    # ------------------------------------------------------------------ documents
    def read_document(self, name: str) -> dict[str, Any] | None:
        rows = self.execute("SELECT value FROM tourneylake_documents WHERE lake = %s AND name = %s", (self.lake, name))
        return rows[0][0] if rows else None

    def write_document(self, name: str, value: Mapping[str, Any]) -> None:
        from psycopg.types.json import Jsonb

        self.execute(
            "INSERT INTO tourneylake_documents (lake, name, value) VALUES (%s, %s, %s) "
            "ON CONFLICT (lake, name) DO UPDATE SET value = EXCLUDED.value",
            (self.lake, name, Jsonb(_jsonable(value))),
        )

    # ------------------------------------------------------------------ the ledger
    def nights(self) -> list[date]:
        rows = self.execute("SELECT DISTINCT night FROM tourneylake_runs WHERE lake = %s ORDER BY night", (self.lake,))
        return [row[0] for row in rows]

    def run_lines(
        self, *, night: date | None = None, open_only: bool = False, run_id: str | None = None
    ) -> list[tuple[str, date, dict[str, Any], bool, list[dict[str, Any]]]]:
        """Runs as (run id, night, header, closed, lines in order)."""
        where, params = ["r.lake = %s"], [self.lake]
        if night is not None:
            where.append("r.night = %s")
            params.append(night)  # type: ignore[arg-type]
        if open_only:
            where.append("NOT r.closed")
        if run_id is not None:
            where.append("r.run_id = %s")
            params.append(run_id)
        rows = self.execute(
            "SELECT r.run_id, r.night, r.header, r.closed, "
            "coalesce(array_agg(l.line ORDER BY l.seq) FILTER (WHERE l.seq IS NOT NULL), '{}') "
            "FROM tourneylake_runs r LEFT JOIN tourneylake_ledger_lines l ON l.lake = r.lake AND l.run_id = r.run_id "
            f"WHERE {' AND '.join(where)} GROUP BY r.run_id, r.night, r.header, r.closed ORDER BY r.run_id",
            tuple(params),
        )
        return [(run, night_, header, closed, list(lines)) for run, night_, header, closed, lines in rows]

    def entries_since(self, moment: datetime, except_run: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """(run header, entry line) of every row called at or after ``moment``, but ``except_run``'s."""
        rows = self.execute(
            "SELECT r.header, l.line FROM tourneylake_ledger_lines l JOIN tourneylake_runs r "
            "ON r.lake = l.lake AND r.run_id = l.run_id "
            "WHERE l.lake = %s AND l.run_id <> %s AND l.called_at >= %s ORDER BY l.run_id, l.seq",
            (self.lake, except_run, moment),
        )
        return [(header, line) for header, line in rows]

    def is_held(self, run_id: str) -> bool:
        """Whether a live session holds the run (its writer's connection is alive)."""
        with self.transaction(what="dead-run check") as conn:
            free = conn.execute("SELECT pg_try_advisory_xact_lock(%s)", (_key(self.lake, "run", run_id),)).fetchone()[0]
        return not free

    def close_dead(self, run_id: str, lines: list[Mapping[str, Any]]) -> bool:
        """Append ``lines`` to a dead run and close it, holding its lease meanwhile; ``False``
        when it is held again (its writer came back) or already closed."""
        from psycopg.types.json import Jsonb

        with self.transaction(what="closing a dead run") as conn:
            if not conn.execute("SELECT pg_try_advisory_xact_lock(%s)", (_key(self.lake, "run", run_id),)).fetchone()[0]:
                return False
            row = conn.execute(
                "SELECT closed FROM tourneylake_runs WHERE lake = %s AND run_id = %s FOR UPDATE", (self.lake, run_id)
            ).fetchone()
            if row is None or row[0]:
                return False
            (last,) = conn.execute(
                "SELECT coalesce(max(seq), -1) FROM tourneylake_ledger_lines WHERE lake = %s AND run_id = %s",
                (self.lake, run_id),
            ).fetchone()
            for number, line in enumerate(lines, start=last + 1):
                conn.execute(
                    "INSERT INTO tourneylake_ledger_lines (lake, run_id, seq, line, called_at) VALUES (%s, %s, %s, %s, %s)",
                    (self.lake, run_id, number, Jsonb(_jsonable(line)), _called_at(line)),
                )
            conn.execute("UPDATE tourneylake_runs SET closed = true WHERE lake = %s AND run_id = %s", (self.lake, run_id))
        return True

    def is_open(self, run_id: str) -> bool:
        rows = self.execute("SELECT closed FROM tourneylake_runs WHERE lake = %s AND run_id = %s", (self.lake, run_id))
        return bool(rows) and not rows[0][0]


def _called_at(line: Mapping[str, Any]) -> Any:
    value = line.get("called_at") if line.get("kind") == "entry" else None
    return value if isinstance(value, datetime | str) else None


class RunLease:
    """One run's lines written to the shared ledger by a connection of its own, which holds the
    run's advisory lock while the run is alive. A dropped connection (a server restart) is
    reopened for up to :data:`RECONNECT_S`: the lease is taken again (refused if a reconciler
    has closed the run meanwhile) and the line written once (lines are numbered)."""

    def __init__(self, state: SharedState, run_id: str, night: date, header: Mapping[str, Any]) -> None:
        self.state, self.run_id, self.night = state, run_id, night
        self.header = _jsonable(header)
        self._conn: Any = None
        self._seq = 0
        self._key = _key(state.lake, "run", run_id)

    def _open(self, conn: Any, *, first: bool) -> None:
        """Take the lease on ``conn`` (and, the first time, create the run)."""
        from psycopg.types.json import Jsonb

        if not conn.execute("SELECT pg_try_advisory_lock(%s)", (self._key,)).fetchone()[0]:
            raise LeaseLost(f"run {self.run_id}: another process holds its ledger (a reconciler): this run stops here")
        if first:
            conn.execute(
                "INSERT INTO tourneylake_runs (lake, run_id, night, header) VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
                (self.state.lake, self.run_id, self.night, Jsonb(self.header)),
            )
            return
        row = conn.execute(
            "SELECT closed FROM tourneylake_runs WHERE lake = %s AND run_id = %s", (self.state.lake, self.run_id)
        ).fetchone()
        if row is None or row[0]:
            raise LeaseLost(f"run {self.run_id} was closed by a reconciler while its connection was down: it stops here")

    def _insert(self, seq: int, line: Mapping[str, Any]) -> None:
        from psycopg.types.json import Jsonb

        self._conn.execute(
            "INSERT INTO tourneylake_ledger_lines (lake, run_id, seq, line, called_at) VALUES (%s, %s, %s, %s, %s) "
            "ON CONFLICT DO NOTHING",
            (self.state.lake, self.run_id, seq, Jsonb(_jsonable(line)), _called_at(line)),
        )

    def append(self, lines: list[Mapping[str, Any]], *, closing: bool = False) -> None:
        """Write ``lines`` in one transaction (committed when this returns: a group commit of
        the lines that came together); ``closing``: and mark the run closed."""
        self._with_connection(lambda: self._write(lines, closing))
        self._seq += len(lines)

    def _write(self, lines: list[Mapping[str, Any]], closing: bool) -> None:
        with self._conn.transaction():
            for number, line in enumerate(lines, start=self._seq):
                self._insert(number, line)
            if closing:
                self._conn.execute(
                    "UPDATE tourneylake_runs SET closed = true, written_at = now() WHERE lake = %s AND run_id = %s",
                    (self.state.lake, self.run_id),
                )

    def _with_connection(self, work: Callable[[], None]) -> None:
        import psycopg

        deadline = time.monotonic() + RECONNECT_S
        while True:
            try:
                if self._conn is None:
                    conn = self.state.connect()
                    try:
                        self._conn = conn
                        self._open(conn, first=self._seq == 0)
                    except BaseException:
                        self._conn = None
                        conn.close()
                        raise
                work()
                return
            except (psycopg.OperationalError, StateUnreachable) as exc:
                self.release()
                if time.monotonic() >= deadline:
                    raise self.state._failure(exc, f"run {self.run_id}'s ledger") from None
                log.warning("run %s: the state database dropped its connection; reconnecting", self.run_id)
                time.sleep(0.5)
            except psycopg.Error as exc:
                raise self.state._failure(exc, f"run {self.run_id}'s ledger") from None

    def release(self) -> None:
        """Let the run go (open or closed): its connection, and so its lease, closed."""
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()


_SCHEMA_MADE: set[str] = set()
_SCHEMA_LOCK = threading.Lock()
_STATES: dict[tuple[str, str], SharedState] = {}


def _ensure_schema(url: str, conn: Any) -> None:
    with _SCHEMA_LOCK:
        if url in _SCHEMA_MADE:
            return
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_key("tourneylake-schema"),))
            conn.execute(_SCHEMA)
        _SCHEMA_MADE.add(url)


def shared_state(url: str, lake: str) -> SharedState:
    """The process's one :class:`SharedState` for this database and lake."""
    with _SCHEMA_LOCK:
        state = _STATES.get((url, lake))
        if state is None:
            state = _STATES[(url, lake)] = SharedState(url, lake)
        return state
