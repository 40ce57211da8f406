"""The standby: one process with tonight's code already loaded, from which each night forks.

A ``tourneylake run`` spends ~0.9 s loading Dagster, its instance's storage, pyarrow, DuckDB and
the HTTP clients before its first request, and a run the UI or the schedule launches pays it
again in a fresh worker. ``tourneylake standby`` loads them once, then waits on a Unix socket
(the owner's alone: mode 0600 in a 0700 folder). A ``tourneylake run`` that finds it hands over its
arguments, directory, environment and standard streams, and the standby forks: the child is that
command, in a process of its own, with the caller's settings and secrets (read from the handed
environment, never from the standby's), its output on the caller's terminal, Ctrl-C passed on,
and its exit status returned. Runs launched from the UI or the schedule fork the same way
(:mod:`pipelines.standby_launcher`).

Nothing but imported modules passes from the standby to a night: it never opens a lake, an
instance or a connection, and builds no Definitions (each child builds its own from its
environment). A standby whose code changed on disk since it started (an edit, ``uv sync``), or
that belongs to another checkout or virtual environment, refuses and stops; the command then runs
in its own process, as it does when no standby waits. ``TOURNEYLAKE_STANDBY`` names another socket, or
``off``.

This module is the client's too, so it imports nothing but the standard library.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import socket
import struct
import sys
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["STANDBY_ENV", "forward", "serve", "socket_path"]

STANDBY_ENV = "TOURNEYLAKE_STANDBY"
#: This checkout (the folder holding ``pipelines`` and ``tourneylake``).
TREE = Path(__file__).resolve().parents[1]
#: The modules a night loads, loaded once by the standby (the rest come with them).
WARM_MODULES = (
    "pipelines.cli",
    "pipelines.nightly",
    "pipelines.definitions",
    "pipelines.dagster_storage",
    "pipelines.run_queue",
    "pipelines.standby_launcher",
    "tourneylake.tables.worker",
    "tourneylake.lake.delta_log",
    "dagster._cli.api",
    "dagster._core.execution.execute_in_process",
    "dagster._core.executor.in_process",
    "dagster._core.instance.factory",
    "dagster._core.storage.local_compute_log_manager",
    "dagster._core.storage.runs.sqlite.sqlite_run_storage",
    "dagster._core.storage.schedules.sqlite.sqlite_schedule_storage",
    "dagster._core.secrets.env_file",
    "dagster._core.instance.runs.run_domain",
    "dagster._core.storage.root",
    "dagster._core.storage.legacy_storage",
    "dagster._core.storage.migration.utils",
    "dagster._core.execution.plan.active",
    "dagster._core.definitions.repository_definition.repository_data_builder",
    "dagster._core.system_config.composite_descent",
    "aiohttp",
    "httpx",
    "httpcore",
    "deltalake",
    "deltalake.writer",
    "pyarrow.dataset",
    "pyarrow.parquet",
    "duckdb",
    "upath.implementations.local",
    "pyarrow.acero",
    "encodings.idna",
    "importlib.resources.readers",
    "fsspec.implementations.local",
    "dateutil.relativedelta",
    "numpy.ma",
    "rich.progress",
    "watchdog.observers.polling",
)
_HEADER = struct.Struct("!I")


# ----------------------------------------------------------------------------- shared


def socket_path() -> Path | None:
    """Where this checkout's standby listens (``None``: ``TOURNEYLAKE_STANDBY=off``): the
    variable's path, else a file named for this checkout and interpreter in the user's own
    runtime folder."""
    named = os.environ.get(STANDBY_ENV, "")
    if named.lower() == "off":
        return None
    if named:
        return Path(named)
    runtime = os.environ.get("XDG_RUNTIME_DIR") or os.environ.get("TMPDIR") or "/tmp"
    return Path(runtime) / f"tourneylake-{os.getuid()}" / f"{zlib.crc32(_identity().encode()):08x}.sock"


def _identity() -> str:
    """This checkout and interpreter: a standby serves only the code its callers would load."""
    return f"{TREE}\0{sys.executable}"


def _send(conn: socket.socket, message: dict[str, Any], fds: list[int] | None = None) -> None:
    data = json.dumps(message).encode()
    if fds:
        socket.send_fds(conn, [_HEADER.pack(len(data)) + data], fds)
    else:
        conn.sendall(_HEADER.pack(len(data)) + data)


def _receive(conn: socket.socket, *, fds: int = 0) -> tuple[dict[str, Any] | None, list[int]]:
    """One message (``None`` at the end of the stream) and the descriptors sent with it."""
    head, received, _flags, _address = socket.recv_fds(conn, _HEADER.size, fds) if fds else (conn.recv(_HEADER.size), [], 0, None)
    if len(head) < _HEADER.size:
        head += _exactly(conn, _HEADER.size - len(head)) if head else b""
    if not head:
        return None, received
    (size,) = _HEADER.unpack(head)
    return json.loads(_exactly(conn, size)), received


def _exactly(conn: socket.socket, size: int) -> bytes:
    chunks = []
    while size:
        chunk = conn.recv(size)
        if not chunk:
            raise ConnectionError("the standby's connection ended mid-message")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


# ----------------------------------------------------------------------------- the caller


def forward(argv: list[str], kind: str = "command", *, on_started: Callable[[int], None] | None = None) -> int | None:
    """Run ``argv`` (``kind`` ``command``: the command line's arguments; ``dagster_run``: a run
    id) in a child of this checkout's standby, with this process's directory, environment and
    standard streams; its exit status, or ``None`` when no standby takes it (none waits, it
    refused): the caller then runs it itself. A ``command``'s caller passes Ctrl-C and SIGTERM
    on to the child and waits for it; ``on_started`` gets the child's pid."""
    path = socket_path()
    if path is None or not path.exists():
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(str(path))
        if _peer_uid(conn) != os.getuid():  # the environment holds secrets: only to our own standby
            conn.close()
            return None
        request = {"kind": kind, "argv": argv, "cwd": os.getcwd(), "env": dict(os.environ), "identity": _identity()}
        _send(conn, request, [0, 1, 2])
        answer, _ = _receive(conn)
    except OSError:
        conn.close()
        return None
    if answer is None or "pid" not in answer:
        conn.close()
        return None
    pid = int(answer["pid"])
    if on_started is not None:
        on_started(pid)
    if kind != "command":
        conn.close()  # the standby reaps the run's worker; the run's record says how it ended
        return 0
    with conn, _passed_on(pid):
        ended, _ = _receive(conn)
    if ended is None or "status" not in ended:
        print(f"error: the night's process {pid} ended without an exit status", file=sys.stderr)
        return 1
    return int(ended["status"])


@contextlib.contextmanager
def _passed_on(pid: int) -> Iterator[None]:
    """Ctrl-C, SIGTERM and SIGHUP sent to ``pid`` instead of ending this process."""

    def pass_on(signum: int, _frame: Any) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)

    kept = {signum: signal.signal(signum, pass_on) for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for signum, handler in kept.items():
            signal.signal(signum, handler)


# ----------------------------------------------------------------------------- the standby


def serve(path: Path, *, idle_exit_s: float | None = None, ready: Callable[[], None] | None = None) -> int:
    """Load :data:`WARM_MODULES`, listen on ``path`` and fork a child per request; 0 once
    stopped (SIGTERM or Ctrl-C, code changed on disk, ``idle_exit_s`` without a request), after
    the nights it forked ended (a second signal: at once); 1 when another standby listens there."""
    import importlib
    import selectors
    import threading

    from tourneylake.runtime.collector import start_up

    if _answered(path):  # said before a second of loading
        return 1

    with start_up():  # what the imports made is never collected: each child skips it too
        for name in WARM_MODULES:
            importlib.import_module(name)
        _warm_up()
    if threading.active_count() != 1:  # a fork copies no other thread: none may hold a lock then
        names = [thread.name for thread in threading.enumerate() if thread is not threading.main_thread()]
        raise RuntimeError(f"the standby started threads while loading ({', '.join(names)}): it cannot fork safely")
    watched = _sources()
    listener = _listen(path)
    if listener is None:
        return 1
    bound = os.stat(path).st_ino
    wake_read, wake_write = os.pipe()
    for end in (wake_read, wake_write):
        os.set_blocking(end, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGTERM, _stop)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "accept")
    selector.register(wake_read, selectors.EVENT_READ, "wake")
    waiting: dict[int, socket.socket | None] = {}
    listening, last = True, time.monotonic()

    def stop_listening() -> None:
        nonlocal listening
        if listening:
            listening = False
            selector.unregister(listener)
            listener.close()
            with contextlib.suppress(OSError):
                if os.stat(path).st_ino == bound:
                    path.unlink()

    if ready is not None:
        ready()
    try:
        while listening or waiting:
            try:
                timeout = None if idle_exit_s is None or not listening else max(0.0, last + idle_exit_s - time.monotonic())
                events = selector.select(timeout)
                if not events and not waiting and idle_exit_s is not None and time.monotonic() - last >= idle_exit_s:
                    stop_listening()
                for key, _mask in events:
                    if key.data == "wake":
                        with contextlib.suppress(BlockingIOError):
                            os.read(wake_read, 512)
                        _reap(waiting)
                    elif listening:
                        conn, _ = listener.accept()
                        last = time.monotonic()
                        if not _take(conn, watched, waiting, closing=(listener, selector, wake_read, wake_write)):
                            stop_listening()  # the code changed: later commands run in their own process
            except KeyboardInterrupt:
                if not listening:
                    break  # a second signal: the nights forked go on, their callers are told nothing
                stop_listening()
    finally:
        stop_listening()
        for caller in waiting.values():
            if caller is not None:
                caller.close()
    return 0


#: The variables the TLS context is built from: a caller with other values builds its own.
_TLS_ENV = ("SSL_CERT_FILE", "SSL_CERT_DIR")


def _warm_up() -> None:
    """What every night of this checkout makes alike, made once: the TLS context (from the
    standby's certificate settings, see :data:`_TLS_ENV`) and the dbt manifest parsed (kept by
    its path and modification time, so a newer one is read again)."""
    from tourneylake.api.client import tls_context
    from tourneylake.tables.models import manifest_document

    tls_context()
    with contextlib.suppress(Exception):  # a manifest that cannot be parsed: each night says why
        manifest_document()


def _stop(_signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt


def _answered(path: Path) -> bool:
    """Whether a process listens on the socket at ``path``."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(str(path))
        return True
    except OSError:
        return False
    finally:
        probe.close()


def _peer_uid(conn: socket.socket) -> int:
    """The user the process at the other end of ``conn`` runs as (the kernel's word for it)."""
    _pid, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    return int(uid)


def _listen(path: Path) -> socket.socket | None:
    """The standby's socket at ``path`` (a stale one replaced), or ``None`` if one answers there.
    The socket is the owner's alone (mode 0600); the default folder too (0700, ours)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if path.parent.name == f"tourneylake-{os.getuid()}":
        if path.parent.stat().st_uid != os.getuid():
            raise PermissionError(f"{path.parent} belongs to another user: the standby's socket cannot live there")
        path.parent.chmod(0o700)
    if _answered(path):
        return None
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # a standby's that ended without removing it (killed)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    kept = os.umask(0o177)
    try:
        listener.bind(str(path))
    finally:
        os.umask(kept)
    listener.listen(16)
    return listener


def _sources() -> dict[str, int]:
    """Every file this checkout's code is read from (its loaded modules, its SQL) and the
    installed packages' folder, with their modification times: a change means a stale standby."""
    import sysconfig

    files = {str(module.__file__) for module in list(sys.modules.values()) if getattr(module, "__file__", None)}
    files = {name for name in files if name.startswith(str(TREE))}
    files |= {str(found) for found in (TREE / "sql").rglob("*.sql")}
    files.add(sysconfig.get_paths()["purelib"])
    return {name: os.stat(name).st_mtime_ns for name in files if os.path.exists(name)}


def _changed(watched: dict[str, int]) -> str | None:
    """The first watched file changed (or gone) since the standby started, if any."""
    for name, mtime in watched.items():
        try:
            if os.stat(name).st_mtime_ns != mtime:
                return name
        except OSError:
            return name
    return None


def _take(
    conn: socket.socket, watched: dict[str, int], waiting: dict[int, socket.socket | None], *, closing: tuple[Any, ...]
) -> bool:
    """Fork a child for the request on ``conn``; ``False`` when the code changed (refused)."""
    conn.settimeout(5.0)  # a caller that connects and says nothing does not hold up the others
    try:
        request, fds = _receive(conn, fds=3)
        conn.settimeout(None)
    except (OSError, ValueError):
        conn.close()
        return True
    try:
        if request is None or len(fds) != 3 or request.get("identity") != _identity() or _peer_uid(conn) != os.getuid():
            _send(conn, {"refused": "another checkout or interpreter"})
            return True
        changed = _changed(watched)
        if changed is not None:
            print(f"standby: {changed} changed since it started: stopping (nights run in their own process)", file=sys.stderr)
            _send(conn, {"refused": "the code changed since the standby started"})
            return False
        pid = os.fork()
        if pid == 0:
            _become(request, fds, conn, closing)
        _send(conn, {"pid": pid})
        waiting[pid] = conn if request.get("kind") == "command" else None
        if waiting[pid] is None:
            conn.close()
        return True
    except OSError:
        conn.close()
        return True
    finally:
        for fd in fds:
            os.close(fd)


def _reap(waiting: dict[int, socket.socket | None]) -> None:
    """Collect every child that ended and tell its caller its exit status."""
    while waiting:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = waiting.pop(pid, None)
        if conn is None:
            continue
        code = os.waitstatus_to_exitcode(status)
        with conn, contextlib.suppress(OSError):  # a caller gone (killed) needs no answer
            _send(conn, {"status": code if code >= 0 else 128 - code})


def _become(request: dict[str, Any], fds: list[int], conn: socket.socket, closing: tuple[Any, ...]) -> None:
    """In the forked child: take the caller's streams, directory, environment and arguments,
    run the request, and end with its status (never returns into the standby's loop)."""
    code = 1
    try:
        os.setpgid(0, 0)  # its own process group: Ctrl-C in the standby's terminal is not the night's
        signal.set_wakeup_fd(-1)
        for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        listener, selector, wake_read, wake_write = closing
        selector.close()
        listener.close()
        os.close(wake_read)
        os.close(wake_write)
        conn.close()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        for stream in (sys.stdout, sys.stderr):
            if isinstance(stream, io.TextIOWrapper):
                stream.reconfigure(line_buffering=stream.isatty())
        os.chdir(request["cwd"])
        if any(request["env"].get(name) != os.environ.get(name) for name in _TLS_ENV):
            from tourneylake.api.client import tls_context

            tls_context.cache_clear()
        os.environ.clear()
        os.environ.update(request["env"])
        if request["kind"] == "dagster_run":
            from pipelines.standby_launcher import execute_launched_run

            code = execute_launched_run(*request["argv"])
        else:
            from pipelines.cli import main
            from tourneylake.cli import fit_consoles

            fit_consoles()
            sys.argv = ["tourneylake", *request["argv"]]
            main()  # ends the process itself
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - the child's end, said once on the caller's stderr
        import traceback

        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)
