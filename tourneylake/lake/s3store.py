"""The lake's own requests to S3 (``s3://``, ``s3a://``) through obstore: the Rust ``object_store``
crate that delta-rs uses too: far less CPU per request than botocore (measured in
``benchmarks/RESULTS.md``), and the GIL given up while a request waits.

:class:`S3ObjectStoreFileSystem` is an fsspec filesystem with exactly what the lake asks of one
(:mod:`~tourneylake.lake.storage`'s :class:`StorePath`, the call sites that use ``.fs``, pyarrow's
and DuckDB's reads through it): ``info``, ``ls``, ``find`` and ``glob`` from one flat listing (a
page per thousand objects, as s3fs), ``cat_file`` with ranges, ``cat``/``cat_ranges`` of many
objects side by side, ``pipe_file``, ``rm_file``, ``rm``, ``mv``, ``du``, ``open``. It keeps no
listing cache (``invalidate_cache`` does nothing): every listing is the store's.

Credentials and endpoint come from the store's usual environment, as for delta-rs
(:func:`s3_options`): ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, else botocore's chain
(a profile, a role…; ``AWS_EC2_METADATA_DISABLED`` honoured). They are never kept in this
object's ``repr`` nor shown in its errors.

Failures: a missing object is :class:`FileNotFoundError`. A request that fails for a reason the
store may get over (a 5xx, ``SlowDown``, a dropped or refused connection, a timeout, a body cut
short: never taken as data) is asked again: by the store client a few times within a second or two
(:data:`RETRY`), then here with backoff until it has failed for
:data:`~tourneylake.lake.outages.PATIENCE_S` seconds (:func:`~tourneylake.lake.outages.ride_out`,
which says so while it lasts). Every request of the lake is idempotent (plain PUTs of whole
objects), so asking again is safe (a Delta commit is delta-rs's, through its own client).
"""

from __future__ import annotations

import errno
import os
import threading
import weakref
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from fsspec.spec import AbstractBufferedFile, AbstractFileSystem

from tourneylake.lake.outages import ride_out, transient_text
from tourneylake.runtime.threads import ProcessThreads

if TYPE_CHECKING:
    from obstore.store import S3Store

__all__ = ["S3ObjectStoreFileSystem", "ShortBodyError", "s3_options"]

T = TypeVar("T")

#: obstore's own retries (5xx, SlowDown, dropped connections, timeouts): a blip, within a second
#: or two; a longer outage is ridden out around them (``ride_out``), which says it is retrying.
RETRY: dict[str, Any] = {
    "max_retries": 3,
    "retry_timeout": timedelta(seconds=2),
    "backoff": {"init_backoff": timedelta(milliseconds=50), "max_backoff": timedelta(seconds=1), "base": 2},
}
#: Objects fetched side by side by :meth:`S3ObjectStoreFileSystem.cat` and ``cat_ranges``.
SIDE_BY_SIDE = 16
#: A PUT above this is a multipart upload (a single PUT below: one request, whole or absent).
MULTIPART_ABOVE = 256 * 1024 * 1024

#: The side-by-side reads of the process (obstore's sync calls give up the GIL).
_READS = ProcessThreads(SIDE_BY_SIDE, "tourneylake-s3")
#: Every filesystem of the process, for a forked child to forget their clients.
_INSTANCES: weakref.WeakValueDictionary[int, S3ObjectStoreFileSystem] = weakref.WeakValueDictionary()


#: Whether this process has made a client (and so started obstore's runtime, whose threads a
#: forked child does not have: obstore then hangs there, whatever the store, measured on 0.12).
_STARTED = False
_FORKED_AFTER_START = False


def _forget_after_fork() -> None:
    """In a forked child: no client nor thread of the parent's. A child forked after the parent
    made requests cannot make any (a one-line error rather than a hang); one forked before (a
    fork server started early) makes its own clients as usual."""
    global _FORKED_AFTER_START
    _FORKED_AFTER_START = _FORKED_AFTER_START or _STARTED
    for fs in list(_INSTANCES.values()):
        fs._stores, fs._lock = {}, threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)


def s3_options(environ: dict[str, str] | os._Environ[str] | None = None) -> dict[str, str]:
    """The S3 store's endpoint and region from its usual environment, as delta-rs and obstore
    take them (``AWS_ENDPOINT_URL``, ``AWS_ALLOW_HTTP`` for an http endpoint, ``AWS_REGION``);
    the credentials are not here: each client reads them from the environment itself."""
    env = os.environ if environ is None else environ
    options = {}
    endpoint = env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL")
    if endpoint:
        options["AWS_ENDPOINT_URL"] = endpoint
        if endpoint.startswith("http://"):
            options["AWS_ALLOW_HTTP"] = "true"
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
    if region:
        options["AWS_REGION"] = region
    return options


class ShortBodyError(OSError):
    """An answer's body shorter than the answer said (a connection cut half-way)."""


def _botocore_credentials() -> dict[str, Any]:
    """botocore's credential chain (a profile, a role, SSO…), when the environment has no key pair."""
    import botocore.session

    found = botocore.session.get_session().get_credentials()
    if found is None:
        raise PermissionError("no AWS credentials found (environment, profile or role)")
    frozen = found.get_frozen_credentials()
    expiry = getattr(found, "_expiry_time", None)
    return {
        "access_key_id": frozen.access_key,
        "secret_access_key": frozen.secret_key,
        "token": frozen.token,
        "expires_at": expiry,
    }


def _transient(exc: BaseException) -> bool:
    """A failure worth asking again: a body cut short, a connection lost, refused or timed out, a
    5xx or throttling the client's own tries did not get past (never a credential's refusal, a
    missing object or a request the store rejects)."""
    if isinstance(exc, ShortBodyError):
        return True
    from obstore.exceptions import GenericError

    return isinstance(exc, GenericError) and transient_text(str(exc))


class S3ObjectStoreFileSystem(AbstractFileSystem):
    """An fsspec filesystem for ``s3://`` over obstore (see the module's docstring). Paths are
    ``bucket/key`` as s3fs has them."""

    protocol = ("s3", "s3a")
    root_marker = ""
    cachable = False
    async_impl = False

    def __init__(self, options: dict[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._options = dict(s3_options() if options is None else options)
        self._stores: dict[str, S3Store] = {}
        self._lock = threading.Lock()
        self.dircache: dict[str, Any] = {}
        _INSTANCES[id(self)] = self

    def __repr__(self) -> str:
        return f"S3ObjectStoreFileSystem(endpoint={self._options.get('AWS_ENDPOINT_URL', 'aws')!r})"

    # ------------------------------------------------------------------ paths
    @classmethod
    def _strip_protocol(cls, path: Any) -> str:
        if isinstance(path, list):
            return [cls._strip_protocol(p) for p in path]  # type: ignore[return-value]
        text = str(path)
        for scheme in ("s3://", "s3a://"):
            if text.startswith(scheme):
                text = text[len(scheme) :]
                break
        return text.rstrip("/")

    def unstrip_protocol(self, name: str) -> str:
        return f"s3://{self._strip_protocol(name)}"

    @staticmethod
    def _split(path: str) -> tuple[str, str]:
        bucket, _, key = S3ObjectStoreFileSystem._strip_protocol(path).partition("/")
        return bucket, key

    def _store(self, bucket: str) -> S3Store:
        global _STARTED
        if _FORKED_AFTER_START:
            raise RuntimeError(
                "this process was forked after its parent used the S3 client, which cannot run here: "
                "start it with spawn or a fork server started before the lake was opened"
            )
        _STARTED = True
        with self._lock:
            store = self._stores.get(bucket)
            if store is None:
                from obstore.store import S3Store

                config: dict[str, Any] = {}
                if "AWS_ENDPOINT_URL" in self._options:
                    config["endpoint"] = self._options["AWS_ENDPOINT_URL"]
                if "AWS_REGION" in self._options:
                    config["region"] = self._options["AWS_REGION"]
                client = {"allow_http": self._options.get("AWS_ALLOW_HTTP") == "true"}
                provider = None
                if not (os.environ.get("AWS_ACCESS_KEY_ID") and os.environ.get("AWS_SECRET_ACCESS_KEY")):
                    provider = _botocore_credentials
                store = S3Store(
                    bucket,
                    config=config,  # type: ignore[arg-type]
                    client_options=client,  # type: ignore[arg-type]
                    retry_config=RETRY,  # type: ignore[arg-type]
                    credential_provider=provider,  # type: ignore[arg-type]
                )
                self._stores[bucket] = store
            return store

    def _again(self, where: str, call: Callable[[], T]) -> T:
        """``call``, asked again while it fails for a reason the store may get over (see the
        module docstring). A missing object (or bucket) is a one-line :class:`FileNotFoundError`
        naming ``where``."""
        try:
            return ride_out(call, _transient)
        except FileNotFoundError:
            raise FileNotFoundError(errno.ENOENT, "no such object", f"s3://{where}") from None

    # ------------------------------------------------------------------ metadata
    @staticmethod
    def _file(bucket: str, meta: Any) -> dict[str, Any]:
        return {
            "name": f"{bucket}/{meta['path']}",
            "size": int(meta["size"]),
            "type": "file",
            "LastModified": meta["last_modified"],
            "ETag": meta.get("e_tag"),
        }

    @staticmethod
    def _directory(name: str) -> dict[str, Any]:
        return {"name": name, "size": 0, "type": "directory", "StorageClass": "DIRECTORY"}

    def info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        """A HEAD; when there is no such object, a listing (one page) says whether it is a folder."""
        import obstore

        bucket, key = self._split(path)
        if not key:
            return self._directory(bucket)
        store = self._store(bucket)
        try:
            return self._file(bucket, self._again(f"{bucket}/{key}", lambda: dict(obstore.head(store, key))))
        except FileNotFoundError:
            pass
        listed = self._again(f"{bucket}/{key}", lambda: obstore.list_with_delimiter(store, key))
        if listed["objects"] or listed["common_prefixes"]:
            return self._directory(f"{bucket}/{key}")
        raise FileNotFoundError(self.unstrip_protocol(path))

    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> list[Any]:
        """One folder's entries (a delimiter listing, a page per thousand); a missing folder is
        :class:`FileNotFoundError`, an object its own entry (as s3fs)."""
        import obstore

        bucket, key = self._split(path)
        store = self._store(bucket)
        entries = self._entries(bucket, key)
        if not entries and key:
            try:
                entries = [self._file(bucket, self._again(f"{bucket}/{key}", lambda: dict(obstore.head(store, key))))]
            except FileNotFoundError:
                raise FileNotFoundError(self.unstrip_protocol(path)) from None
        entries.sort(key=lambda e: e["name"])
        return entries if detail else [e["name"] for e in entries]

    def _entries(self, bucket: str, key: str) -> list[dict[str, Any]]:
        import obstore

        store = self._store(bucket)
        listed = self._again(f"{bucket}/{key}", lambda: obstore.list_with_delimiter(store, key or None))
        entries = [self._directory(f"{bucket}/{p}") for p in listed["common_prefixes"]]
        entries += [self._file(bucket, meta) for meta in listed["objects"]]
        return entries

    def _flat(self, bucket: str, key: str) -> list[dict[str, Any]]:
        """Every object under ``key`` (a page per thousand objects)."""
        import obstore

        store = self._store(bucket)

        def listing() -> list[Any]:
            return [meta for page in obstore.list(store, key or None, chunk_size=1000) for meta in page]

        return [self._file(bucket, meta) for meta in self._again(f"{bucket}/{key}", listing)]

    def find(self, path: str, maxdepth: int | None = None, withdirs: bool = False, detail: bool = False, **kwargs: Any) -> Any:
        """Everything under ``path`` from one flat listing (``maxdepth=1``: one delimiter listing),
        never a listing per folder. A missing folder is an empty answer (no HEAD after it: the lake
        never asks this of an object)."""
        bucket, key = self._split(path)
        if not bucket:
            raise ValueError("cannot list all of S3")
        base = f"{bucket}/{key}" if key else bucket
        if maxdepth is not None and maxdepth < 1:
            raise ValueError("maxdepth must be at least 1")
        if maxdepth == 1:
            found = [e for e in self._entries(bucket, key) if withdirs or e["type"] == "file"]
        else:
            files = self._flat(bucket, key)
            found = []
            folders: set[str] = set()
            for entry in files:
                relative = entry["name"][len(base) + 1 :].split("/")
                if maxdepth is not None and len(relative) > maxdepth:
                    if not withdirs:
                        continue
                    relative = relative[:maxdepth]
                    folders.update("/".join([base, *relative[: i + 1]]) for i in range(len(relative)))
                    continue
                found.append(entry)
                if withdirs:
                    folders.update("/".join([base, *relative[: i + 1]]) for i in range(len(relative) - 1))
            found += [self._directory(name) for name in folders]
        found.sort(key=lambda e: e["name"])
        return {e["name"]: e for e in found} if detail else [e["name"] for e in found]

    def du(self, path: str, total: bool = True, maxdepth: int | None = None, withdirs: bool = False, **kwargs: Any) -> Any:
        sizes = {name: info["size"] for name, info in self.find(path, maxdepth=maxdepth, detail=True).items()}
        return sum(sizes.values()) if total else sizes

    def invalidate_cache(self, path: str | None = None) -> None:
        """Nothing to forget: this filesystem keeps no listing."""

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        """Nothing to make: a folder is the prefix of its objects."""

    def mkdir(self, path: str, create_parents: bool = True, **kwargs: Any) -> None:
        """Nothing to make: a folder is the prefix of its objects."""

    # ------------------------------------------------------------------ reads
    def _get(self, bucket: str, key: str, start: int | None = None, end: int | None = None) -> bytes:
        """The object (or its bytes ``start:end``), checked whole against the answer's length."""
        import obstore

        store = self._store(bucket)
        if (start is not None and start < 0) or (end is not None and end < 0):
            size = self.info(f"{bucket}/{key}")["size"]
            start = size + start if start is not None and start < 0 else start
            end = size + end if end is not None and end < 0 else end
        options: dict[str, Any] = {}
        if start or end is not None:
            if end is not None and end <= (start or 0):
                return b""
            options["range"] = (start or 0, end) if end is not None else {"offset": start}

        def read() -> bytes:
            answer = obstore.get(store, key, options=options or None)  # type: ignore[arg-type]
            data = bytes(answer.bytes())
            expected = answer.range[1] - answer.range[0]
            if len(data) != expected:
                raise ShortBodyError(f"s3://{bucket}/{key}: {len(data)} bytes of {expected}")
            return data

        return self._again(f"{bucket}/{key}", read)

    def cat_file(self, path: str, start: int | None = None, end: int | None = None, **kwargs: Any) -> bytes:
        bucket, key = self._split(path)
        return self._get(bucket, key, start, end)

    def cat(self, path: Any, recursive: bool = False, on_error: str = "raise", **kwargs: Any) -> Any:
        """Several objects side by side (a missing one omitted or returned with ``on_error``)."""
        if isinstance(path, str) and not recursive and not any(c in path for c in "*?["):
            return self.cat_file(path)
        paths = self.expand_path(path, recursive=recursive) if recursive else [self._strip_protocol(p) for p in path]
        answers = self._side_by_side(paths, [None] * len(paths), [None] * len(paths), on_error)
        out = {}
        for name, answer in zip(paths, answers, strict=True):
            if isinstance(answer, BaseException) and on_error == "omit":
                continue
            out[name] = answer
        return out

    def cat_ranges(
        self, paths: list[str], starts: Any, ends: Any, max_gap: Any = None, on_error: str = "return", **kwargs: Any
    ) -> list[Any]:
        n = len(paths)
        starts = starts if isinstance(starts, list) else [starts] * n
        ends = ends if isinstance(ends, list) else [ends] * n
        return self._side_by_side([self._strip_protocol(p) for p in paths], starts, ends, on_error)

    def _side_by_side(self, paths: list[str], starts: list[Any], ends: list[Any], on_error: str) -> list[Any]:
        def one(item: tuple[str, Any, Any]) -> Any:
            name, start, end = item
            try:
                return self.cat_file(name, start, end)
            except Exception as exc:
                if on_error == "raise" or (on_error == "omit" and not isinstance(exc, FileNotFoundError)):
                    raise
                return exc

        items = list(zip(paths, starts, ends, strict=True))
        if len(items) <= 1:
            return [one(item) for item in items]
        return list(_READS.get().map(one, items))

    def _open(self, path: str, mode: str = "rb", block_size: Any = None, autocommit: bool = True, **kwargs: Any) -> Any:
        return _ObjectFile(self, path, mode, block_size="default" if block_size is None else block_size, **kwargs)

    # ------------------------------------------------------------------ writes
    def pipe_file(self, path: str, value: bytes, **kwargs: Any) -> str | None:
        """One PUT of the whole object (a multipart upload above :data:`MULTIPART_ABOVE`); the new
        object's ETag."""
        import obstore

        bucket, key = self._split(path)
        store = self._store(bucket)
        data = bytes(value)
        done = self._again(f"{bucket}/{key}", lambda: obstore.put(store, key, data, use_multipart=len(data) > MULTIPART_ABOVE))
        return done.get("e_tag")

    def rm_file(self, path: str) -> None:
        """One DELETE (S3 answers the same whether the object was there or not)."""
        import obstore

        bucket, key = self._split(path)
        store = self._store(bucket)
        self._again(f"{bucket}/{key}", lambda: obstore.delete(store, key))

    def rm(self, path: Any, recursive: bool = False, maxdepth: int | None = None) -> None:
        """Objects, and with ``recursive`` everything under a prefix (one flat listing, then bulk
        deletes of a thousand). Nothing there at all is :class:`FileNotFoundError`."""
        for one in [path] if isinstance(path, str) else list(path):
            bucket, key = self._split(one)
            keys = [e["name"].partition("/")[2] for e in self._flat(bucket, key)] if recursive and key else []
            if not keys:
                try:
                    self._head(bucket, key)  # an object itself (no listing: a folder had objects)
                except FileNotFoundError:
                    raise FileNotFoundError(self.unstrip_protocol(one)) from None
                keys = [key]
            for at in range(0, len(keys), 1000):
                self._delete(bucket, keys[at : at + 1000])

    def _head(self, bucket: str, key: str) -> dict[str, Any]:
        import obstore

        store = self._store(bucket)
        return self._again(f"{bucket}/{key}", lambda: dict(obstore.head(store, key)))

    def _delete(self, bucket: str, keys: list[str]) -> None:
        import obstore

        store = self._store(bucket)
        self._again(f"{bucket}/{keys[0]}", lambda: obstore.delete(store, keys))

    def cp_file(self, path1: str, path2: str, **kwargs: Any) -> None:
        import obstore

        bucket, key = self._split(path1)
        bucket2, key2 = self._split(path2)
        if bucket != bucket2:
            self.pipe_file(path2, self.cat_file(path1))
            return
        store = self._store(bucket)
        self._again(f"{bucket}/{key}", lambda: obstore.copy(store, key, key2))

    def mv(self, path1: str, path2: str, recursive: bool = False, maxdepth: int | None = None, **kwargs: Any) -> None:
        """A server-side copy, then the source's deletion (never atomic as a pair)."""
        if recursive and self.isdir(path1):
            base1, base2 = self._strip_protocol(path1), self._strip_protocol(path2)
            for name in self.find(base1):
                self.mv(name, base2 + name[len(base1) :])
            return
        self.cp_file(path1, path2)
        self.rm_file(path1)


class _ObjectFile(AbstractBufferedFile):
    """An object opened for pyarrow or DuckDB: reads are ranged GETs; a write is one PUT at close."""

    def _fetch_range(self, start: int, end: int) -> bytes:
        return bytes(self.fs.cat_file(self.path, start, end))

    def _initiate_upload(self) -> None:
        """Nothing to start: the object is one PUT at close."""

    def _upload_chunk(self, final: bool = False) -> bool:
        if not final:
            return False  # the buffer grows until close
        self.fs.pipe_file(self.path, self.buffer.getvalue())
        return True
