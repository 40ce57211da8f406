"""Where the lake lives: a local directory or any fsspec URL (``s3://bucket/prefix``, ``gs://…``,
``memory://…``), the one filesystem abstraction under the lake, the ledger and the state.

:func:`location` gives a :class:`pathlib.Path` for a local directory (``file://`` included),
whose operations stay the disk's (temporary file, ``fsync``, ``os.replace``, ``flock``), or a
:class:`StorePath`: the subset of :class:`pathlib.Path` the lake uses, over
``fsspec.url_to_fs``. Every other store is an object store: a write is one whole object, there is
no atomic rename and no lock. Credentials come from the store's own environment (``AWS_*``,
``GOOGLE_APPLICATION_CREDENTIALS``…), never from our settings or the URL; a store that cannot be
reached or refuses them is a one-line :class:`~tourneylake.errors.LakeError` naming the URL.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import shutil
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tourneylake.errors import ConfigError, LakeError, TourneylakeError, one_line

__all__ = [
    "AnyPath",
    "StorePath",
    "atomic_write",
    "location",
    "lock",
    "read_if_there",
    "remove_tree",
    "replace",
]

log = logging.getLogger(__name__)


def location(data_dir: str | os.PathLike[str]) -> Path | StorePath:
    """The data directory as a path object: a local :class:`Path` (``file://`` included), or a
    :class:`StorePath` on its fsspec filesystem."""
    from tourneylake.config import check_location, is_url, shown  # not imported by the raw saver's process

    if isinstance(data_dir, StorePath):
        return data_dir
    if not is_url(data_dir):
        return Path(data_dir)
    url = str(data_dir)
    try:
        check_location(url)
    except ValueError as exc:
        raise ConfigError(f"TOURNEYLAKE_DATA_DIR: {exc} (got {shown(url)!r})") from None
    fs, path = _filesystem(url)
    from fsspec.implementations.local import LocalFileSystem

    if isinstance(fs, LocalFileSystem):
        return Path(path)
    return StorePath(fs, path)


def is_store_url(data_dir: str) -> bool:
    """Whether a data directory (as a worker process is given it) is an object store's URL."""
    return "://" in data_dir and not data_dir.lower().startswith("file://")


def store_path(url: str) -> StorePath:
    """An object store's URL as a :class:`StorePath`, without the settings' checks (for a worker
    process, handed a URL its parent checked)."""
    fs, path = _filesystem(url)
    return StorePath(fs, path)


_FILESYSTEMS: dict[tuple[str, str], tuple[Any, str]] = {}
_FILESYSTEMS_LOCK = threading.Lock()


def _filesystem(url: str) -> tuple[Any, str]:
    """The URL's filesystem, one instance per URL and store environment (a test, or a process,
    that changes ``AWS_ENDPOINT_URL`` gets a new client, never a stale one): on S3 our own over
    obstore (:mod:`~tourneylake.lake.s3store`, far less CPU a request than s3fs), else
    ``fsspec.url_to_fs`` (gcsfs, adlfs…; ``max_concurrency`` 1: with more, every whole read of
    an async fsspec store first asks the size, a HEAD)."""
    env = sorted((k, v) for k, v in os.environ.items() if k.startswith(("AWS_", "GOOGLE_", "AZURE_", "GCS", "FSSPEC_")))
    key = (url, hashlib.sha256(repr(env).encode()).hexdigest())
    with _FILESYSTEMS_LOCK:
        if key not in _FILESYSTEMS:
            try:
                if url.lower().startswith(("s3://", "s3a://")):
                    from tourneylake.lake.s3store import S3ObjectStoreFileSystem

                    _FILESYSTEMS[key] = (S3ObjectStoreFileSystem(), S3ObjectStoreFileSystem._strip_protocol(url))
                    return _FILESYSTEMS[key]
                import fsspec

                fs, _ = _FILESYSTEMS[key] = fsspec.url_to_fs(url, skip_instance_cache=True)
                if getattr(fs, "max_concurrency", 1) > 1:
                    fs.max_concurrency = 1
            except Exception as exc:  # noqa: BLE001 - any store's refusal is one line
                from tourneylake.config import shown

                raise ConfigError(f"TOURNEYLAKE_DATA_DIR: cannot open {shown(url)}: {one_line(exc)}") from None
        return _FILESYSTEMS[key]


def _store_error(target: StorePath, exc: BaseException) -> Exception:
    name = type(exc).__name__
    hint = ""
    if "credential" in name.lower() or "credential" in str(exc).lower() or isinstance(exc, PermissionError):
        hint = " — the store's credentials come from its usual environment (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or AWS_PROFILE for s3)"
    text = one_line(exc).split(" Debug source:", 1)[0]  # obstore's debug dump (a provider's traceback) left out
    return LakeError(f"the lake's store refused {target} ({name}: {text}){hint}")


@contextlib.contextmanager
def _translated(target: StorePath) -> Iterator[None]:
    """A store's failure as a one-line LakeError; a missing object stays FileNotFoundError."""
    try:
        yield
    except (FileNotFoundError, TourneylakeError):
        raise
    except Exception as exc:  # noqa: BLE001 - botocore, aiohttp, gcsfs…: one line, whatever the store
        raise _store_error(target, exc) from None


class StorePath:
    """A path on an fsspec filesystem: the subset of :class:`pathlib.Path` the lake uses. Its
    ``str`` is the full URL (``s3://bucket/prefix/lake/…``); :attr:`path` is the filesystem's own
    path (no protocol). Directories are prefixes: ``mkdir`` does nothing."""

    __slots__ = ("_info", "fs", "path")

    def __init__(self, fs: Any, path: str, info: dict[str, Any] | None = None) -> None:
        self.fs = fs
        self.path = path.rstrip("/") or "/"
        self._info = info  # from the listing that found it, when it was found by one

    # -------------------------------------------------------------- pure
    def __truediv__(self, part: str | os.PathLike[str]) -> StorePath:
        return StorePath(self.fs, f"{self.path}/{os.fspath(part)}")

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    @property
    def parent(self) -> StorePath:
        head = self.path.rsplit("/", 1)[0] if "/" in self.path else ""
        return StorePath(self.fs, head)

    def with_name(self, name: str) -> StorePath:
        return self.parent / name

    def __str__(self) -> str:
        return str(self.fs.unstrip_protocol(self.path))

    def __repr__(self) -> str:
        return f"StorePath({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StorePath) and (self.fs.protocol, self.path) == (other.fs.protocol, other.path)

    def __hash__(self) -> int:
        return hash((str(self.fs.protocol), self.path))

    def __lt__(self, other: StorePath) -> bool:
        return self.path < other.path

    # -------------------------------------------------------------- the store
    def _type(self) -> str | None:
        """``file``, ``directory`` or ``None`` (absent). Through ``info``, not fsspec's
        ``exists``/``isfile``, which answer ``False`` for a store that refuses the credentials."""
        if self._info is not None:
            return str(self._info.get("type"))
        with _translated(self):
            try:
                return str(self.fs.info(self.path).get("type"))
            except FileNotFoundError:
                return None

    def exists(self) -> bool:
        return self._type() is not None

    def is_file(self) -> bool:
        return self._type() == "file"

    def is_dir(self) -> bool:
        return self._type() == "directory"

    def iterdir(self) -> Iterator[StorePath]:
        """The entries right under this prefix (a fresh listing: another process may have written)."""
        with _translated(self):
            self.fs.invalidate_cache(self.path)
            try:
                entries = self.fs.ls(self.path, detail=True)
            except FileNotFoundError:
                return iter(())
        return iter(sorted(StorePath(self.fs, e["name"], e) for e in entries if e["name"].rstrip("/") != self.path))

    def glob(self, pattern: str) -> Iterator[StorePath]:
        with _translated(self):
            self.fs.invalidate_cache(self.path)
            found = self.fs.glob(f"{self.path}/{pattern}", detail=True)
        return iter(sorted(StorePath(self.fs, name, info) for name, info in found.items()))

    def read_bytes(self) -> bytes:
        with _translated(self):
            return bytes(self.fs.cat_file(self.path))

    def write_bytes(self, data: bytes) -> None:
        """One object, whole or absent (a single PUT on an object store)."""
        with _translated(self):
            self.fs.pipe_file(self.path, data)

    def mkdir(self, parents: bool = False, exist_ok: bool = False) -> None:
        """Nothing to do: an object store's directories are the prefixes of its objects."""

    def unlink(self, missing_ok: bool = False) -> None:
        with _translated(self):
            try:
                self.fs.rm_file(self.path)
            except FileNotFoundError:
                if not missing_ok:
                    raise

    def modified(self) -> datetime | None:
        """When the object was last written (from the listing that found it, else asked)."""
        info = self._info
        if info is None:
            with _translated(self):
                info = self.fs.info(self.path)
        for key in ("LastModified", "mtime", "created", "updated", "last_modified"):
            value = info.get(key)
            if isinstance(value, datetime):
                return value if value.tzinfo else value.replace(tzinfo=UTC)
            if isinstance(value, (int, float)):
                return datetime.fromtimestamp(value, tz=UTC)
            if isinstance(value, str):
                with contextlib.suppress(ValueError):
                    return datetime.fromisoformat(value.replace("Z", "+00:00"))
        return None

    def cat_many(self, paths: list[StorePath]) -> dict[StorePath, bytes]:
        """Several objects at once (concurrently on async stores such as s3)."""
        if not paths:
            return {}
        with _translated(self):
            found = self.fs.cat([p.path for p in paths], on_error="omit")
        by_path = {p.path: p for p in paths}
        return {by_path[name]: bytes(data) for name, data in found.items() if name in by_path}


AnyPath = Path | StorePath


# ---------------------------------------------------------------------- operations
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)


def read_if_there(path: AnyPath) -> bytes | None:
    """A file's bytes, or ``None`` when there is no such file: one read (on a store one GET,
    where asking first whether it is there costs a HEAD, and a listing when it is not)."""
    try:
        return path.read_bytes()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None


def atomic_write(path: AnyPath, data: bytes, *, fsync: bool) -> None:
    """Write ``path`` whole or not at all. Local: a temporary file, fsynced, ``os.replace``-d,
    its directory fsynced. Object store: one PUT (an object is never seen half-written).

    Locally in as few system calls as it takes (each gives up the GIL and waits to take it back
    while the harvest's event loop runs, and the harvest saves every body this way): the
    directory is made only when the file cannot be created for want of it, and the file is
    written through its descriptor, without Python's buffered file object."""
    if isinstance(path, StorePath):
        path.write_bytes(data)
        return
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        try:
            fd = os.open(tmp, _NEW_FILE, 0o666)
        except FileNotFoundError:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(tmp, _NEW_FILE, 0o666)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):  # a failed clean-up must not hide what failed
            tmp.unlink()
        raise
    if fsync:
        fsync_dir(path.parent)


def fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def replace(source: AnyPath, target: AnyPath) -> None:
    """Rename ``source`` to ``target`` (replacing it). Local: ``os.replace``, atomic. Object
    store: a server-side copy, then the source's deletion — never atomic as a pair, so callers
    use it only where seeing both for a moment is harmless (a raw body's status, a closed run)."""
    if isinstance(source, StorePath) and isinstance(target, StorePath):
        with _translated(source):
            source.fs.mv(source.path, target.path)
        return
    os.replace(source, target)  # type: ignore[arg-type]


def remove_tree(path: AnyPath) -> None:
    """Delete a directory (or prefix) and everything under it; absent is fine."""
    if isinstance(path, StorePath):
        with _translated(path), contextlib.suppress(FileNotFoundError):
            path.fs.rm(path.path, recursive=True)
        return
    shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def lock(path: AnyPath, *, wait: bool = True) -> Iterator[bool]:
    """An exclusive lock between processes: ``flock`` on a local file (the kernel drops it when
    its holder dies; waits for the holder, or with ``wait=False`` yields ``False`` at once when
    another holds it). An object store has no lock: this yields ``False`` and relies on the
    one-writer-per-night rule (Dagster's pools serialise the runs)."""
    if isinstance(path, StorePath):
        yield False
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not wait:
                yield False
                return
            log.info("another process holds %s: waiting for it to finish", path)
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield True
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
