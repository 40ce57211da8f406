"""Talking to a worker process of ours over its standard input and output.

Two workers speak this way: the tables worker (:mod:`tourneylake.tables.worker`) and the raw
saver (:mod:`tourneylake.lake.raw_saver`). A message is a 4-byte little-endian length, then a
msgpack array (``msgspec``). A worker is started with :func:`worker_env`: only what Python needs
to start (and, for a lake on an object store, that store's environment), never the service's
credentials.

Kept light (the standard library and msgspec): the raw saver imports it before its first body.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import IO, Any

import msgspec

__all__ = ["LENGTH", "decode", "frame", "receive", "send", "split_frames", "worker_env"]

LENGTH = struct.Struct("<I")
_encode = msgspec.msgpack.Encoder().encode
decode = msgspec.msgpack.Decoder().decode
_ENV_KEPT = ("PATH", "HOME", "LANG", "TMPDIR", "TZ", "VIRTUAL_ENV", "SYSTEMROOT", "PYTHONDONTWRITEBYTECODE", "PYTHONHASHSEED")


def frame(message: list[Any]) -> bytes:
    payload = _encode(message)
    return LENGTH.pack(len(payload)) + payload


def send(stream: IO[bytes], message: list[Any]) -> None:
    stream.write(frame(message))


def receive(stream: IO[bytes]) -> list[Any] | None:
    """The next message, or ``None`` at the end of the stream (a torn frame is an end too)."""
    head = stream.read(LENGTH.size)
    if len(head) < LENGTH.size:
        return None
    (size,) = LENGTH.unpack(head)
    payload = stream.read(size)
    return decode(payload) if len(payload) == size else None


def split_frames(buffer: bytearray, limit: int | None = None) -> list[list[Any]]:
    """The whole messages at the start of ``buffer``, removed from it (for a reader fed by an
    event loop, which hands over bytes as they come: a frame may arrive in pieces). A frame
    longer than ``limit`` bytes, or one that does not decode, raises ``ValueError`` (a
    ``msgspec.DecodeError``); the messages before it are lost with it."""
    messages, at = [], 0
    while len(buffer) - at >= LENGTH.size:
        (size,) = LENGTH.unpack_from(buffer, at)
        if limit is not None and size > limit:
            raise ValueError(f"a frame of {size} bytes, where at most {limit} are expected")
        end = at + LENGTH.size + size
        if len(buffer) < end:
            break
        messages.append(decode(buffer[at + LENGTH.size : end]))
        at = end
    del buffer[:at]
    return messages


#: An object store's own environment (its endpoint, region and credentials), which a worker writing
#: to a lake on that store needs; never the service's.
_STORE_ENV = ("AWS_", "GOOGLE_", "GCS", "AZURE_", "FSSPEC_")


def worker_env(*, store: bool = False) -> dict[str, str]:
    """What a worker process starts with: what Python needs, and (``store``: the lake is on an
    object store) that store's environment."""
    env = {k: v for k, v in os.environ.items() if k in _ENV_KEPT or k.startswith("LC_") or (store and k.startswith(_STORE_ENV))}
    # The worker imports this very tree (a checkout run with `python -m` need not be installed).
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH")) if p)
    return env
