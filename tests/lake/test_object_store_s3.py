"""The lake's own S3 client (``tourneylake.lake.s3store``, over obstore) against a real S3 API
(``moto_server``): reads through a proxy that cuts answers half-way are whole or asked again,
never short data; a body that stays short is refused with one line; a folder's objects, at any
depth, come from one listing; a missing object is ``FileNotFoundError``; no secret in a repr or
an error."""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import fsspec
import obstore
import pytest

from tests.conftest import S3_SECRET as SECRET
from tests.s3_proxy import running_proxy
from tourneylake.errors import LakeError
from tourneylake.lake import outages
from tourneylake.lake.s3store import S3ObjectStoreFileSystem, s3_options
from tourneylake.lake.storage import StorePath, location, read_if_there, remove_tree


@contextlib.contextmanager
def bucket_behind_proxy(moto: str, s3_env: Callable[[str], None], **faults: Any) -> Iterator[tuple[Any, StorePath]]:
    """A new bucket, our client's requests through the proxy: (proxy, the bucket's root)."""
    with running_proxy(moto, **faults) as proxy:
        s3_env(moto)
        bucket = f"lake-{uuid.uuid4().hex[:8]}"
        fsspec.filesystem("s3", skip_instance_cache=True).mkdir(bucket)
        s3_env(proxy.url)
        root = location(f"s3://{bucket}/prefix")
        assert isinstance(root, StorePath) and isinstance(root.fs, S3ObjectStoreFileSystem)
        yield proxy, root


def test_reads_through_answers_cut_half_way_are_whole(moto: str, s3_env: Callable[[str], None]) -> None:
    """Half the requests fail (500, SlowDown, dropped, cut half-way): every read, whole or by
    ranges, one at a time or side by side, gives the object's bytes exactly."""
    objects = {f"o{i}": os.urandom(50_000 + i) for i in range(30)}
    with bucket_behind_proxy(moto, s3_env, faults=0.5, max_faults=10_000, seed=7) as (proxy, root):
        for name, data in objects.items():
            (root / name).write_bytes(data)
        for name, data in objects.items():
            assert (root / name).read_bytes() == data
        paths = [root / name for name in objects]
        assert {p.name: data for p, data in root.cat_many(paths).items()} == objects
        heads = root.fs.cat_ranges([p.path for p in paths], [10] * len(paths), [4_000] * len(paths))
        assert heads == [data[10:4_000] for data in objects.values()]
        faults = proxy.stats()["faults"]
    assert faults.get("truncate", 0) >= 5 and faults.get("drop", 0) >= 5, faults


class _Short:
    """An answer of ``length`` bytes that says it has ``said``."""

    def __init__(self, data: bytes, said: int) -> None:
        self.data, self.range = data, (0, said)

    def bytes(self) -> bytes:
        return self.data


def test_a_body_shorter_than_its_answer_said_is_asked_again_then_refused(
    moto: str, s3_env: Callable[[str], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    with bucket_behind_proxy(moto, s3_env) as (_, root):
        (root / "doc").write_bytes(b"0123456789")
        real, calls = obstore.get, []

        def once_short(store: Any, key: str, options: Any = None) -> Any:
            calls.append(key)
            return _Short(b"01234", 10) if len(calls) == 1 else real(store, key, options=options)

        monkeypatch.setattr(obstore, "get", once_short)
        assert (root / "doc").read_bytes() == b"0123456789" and len(calls) == 2

        monkeypatch.setattr(obstore, "get", lambda store, key, options=None: calls.append(key) or _Short(b"01234", 10))
        monkeypatch.setattr(outages, "PATIENCE_S", 0.5)  # asked again until it has failed this long
        calls.clear()
        with pytest.raises(LakeError, match="5 bytes of 10") as caught:
            (root / "doc").read_bytes()
        assert len(calls) > 2 and "\n" not in str(caught.value)


def test_a_folder_at_any_depth_is_one_listing(moto: str, s3_env: Callable[[str], None]) -> None:
    """find, a glob two levels deep and du: one LIST each (s3fs's find of a folder was one too;
    fsspec's default walks a folder at a time); a folder's entries: one LIST."""
    with bucket_behind_proxy(moto, s3_env) as (proxy, root):
        for night in range(5):
            for run in range(3):
                (root / "ledger" / f"snapshot_date=2026-11-{night + 10}" / f"run-{run}.jsonl").write_bytes(b"x" * run)
            (root / "ledger" / f"snapshot_date=2026-11-{night + 10}" / "run-9.open" / "0001.jsonl").write_bytes(b"y")
        base = root / "ledger"

        def lists(call: Callable[[], object]) -> tuple[object, dict[str, int]]:
            proxy.reset()
            answer = call()
            counts = proxy.stats()["counts"]
            return answer, {"requests": counts["requests"], "LIST": counts.get("LIST", 0)}

        found, counts = lists(lambda: root.fs.find(base.path))
        assert len(found) == 20 and counts == {"requests": 1, "LIST": 1}  # type: ignore[arg-type]
        found, counts = lists(lambda: [p.name for p in base.glob("snapshot_date=*/run-*.jsonl")])
        assert len(found) == 15 and counts == {"requests": 1, "LIST": 1}  # type: ignore[arg-type]
        found, counts = lists(lambda: [p.name for p in base.glob("snapshot_date=*/run-*.open")])
        assert len(found) == 5 and counts == {"requests": 1, "LIST": 1}  # type: ignore[arg-type]
        found, counts = lists(lambda: sorted(p.name for p in base.iterdir() if p.is_dir()))
        assert found == [f"snapshot_date=2026-11-{n}" for n in range(10, 15)] and counts == {"requests": 1, "LIST": 1}
        found, counts = lists(lambda: root.fs.du(base.path, total=True))
        assert found == 5 * (0 + 1 + 2 + 1) and counts == {"requests": 1, "LIST": 1}
        found, counts = lists(lambda: remove_tree(base))
        assert counts["LIST"] == 1 and not list(base.iterdir())


def test_a_missing_object_is_file_not_found(moto: str, s3_env: Callable[[str], None]) -> None:
    with bucket_behind_proxy(moto, s3_env) as (proxy, root):
        missing = root / "nowhere" / "doc.json"
        for read in (missing.read_bytes, lambda: root.fs.cat_file(missing.path), lambda: root.fs.info(missing.path)):
            with pytest.raises(FileNotFoundError):
                read()
        proxy.reset()
        assert read_if_there(missing) is None and proxy.stats()["counts"]["requests"] == 1  # one GET, no HEAD first
        assert not missing.exists() and not list(missing.parent.iterdir())
        assert root.cat_many([missing]) == {}
        missing.unlink(missing_ok=True)


def test_no_secret_in_a_repr_or_a_failure(moto: str, s3_env: Callable[[str], None], monkeypatch: pytest.MonkeyPatch) -> None:
    s3_env(moto)
    root = location(f"s3://no-such-bucket-{uuid.uuid4().hex[:8]}/prefix")
    assert isinstance(root, StorePath)
    assert SECRET not in repr(root.fs) and SECRET not in repr(root) and SECRET not in str(s3_options())
    with pytest.raises((LakeError, FileNotFoundError)) as caught:
        (root / "doc").write_bytes(b"x")
    assert SECRET not in str(caught.value) and "\n" not in str(caught.value)


def test_a_child_forked_after_requests_fails_in_one_line_not_hangs(moto: str, s3_env: Callable[[str], None]) -> None:
    """obstore's runtime does not survive a fork (its threads stay in the parent; a child's
    request would hang): the lake's processes are spawned, and Dagster's fork server starts
    before any request. A child forked after requests anyway gets a one-line error at once."""
    with bucket_behind_proxy(moto, s3_env) as (_, root):
        (root / "doc").write_bytes(b"parent")
        pid = os.fork()
        if pid == 0:  # the child: exit 0 only if the read failed in one line, never back into pytest
            code = 1
            try:
                (root / "doc").read_bytes()
            except LakeError as exc:
                code = 0 if "forked" in str(exc) and "\n" not in str(exc) else 2
            finally:
                os._exit(code)
        deadline = time.monotonic() + 30
        while (done := os.waitpid(pid, os.WNOHANG)) == (0, 0) and time.monotonic() < deadline:
            time.sleep(0.05)
        if done == (0, 0):
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        assert done[0] == pid and os.waitstatus_to_exitcode(done[1]) == 0
        assert (root / "doc").read_bytes() == b"parent"  # the parent's client still works


def test_credentials_from_a_profile_when_the_environment_has_no_key_pair(
    moto: str, s3_env: Callable[[str], None], tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No key pair in the environment: the client takes botocore's chain, here a named profile
    of a shared credentials file (as on a laptop), and the lake reads and writes with it."""
    s3_env(moto)
    bucket = f"lake-{uuid.uuid4().hex[:8]}"
    fsspec.filesystem("s3", skip_instance_cache=True).mkdir(bucket)
    credentials = tmp_path / "credentials"
    credentials.write_text(f"[lake]\naws_access_key_id = testing\naws_secret_access_key = {SECRET}\n")
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    monkeypatch.setenv("AWS_PROFILE", "lake")
    root = location(f"s3://{bucket}/prefix")
    assert isinstance(root, StorePath) and isinstance(root.fs, S3ObjectStoreFileSystem)
    (root / "night" / "a.json").write_bytes(b"{}")
    assert (root / "night" / "a.json").read_bytes() == b"{}"
    assert [p.name for p in (root / "night").iterdir()] == ["a.json"]
    assert SECRET not in repr(root.fs)
