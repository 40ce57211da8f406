"""Column builders shared by the normalisers.

The hot loops only collect the served strings into Python lists; conversion to numbers and
times happens here, once per column, with Arrow's vectorised casts. A value that does not parse
(an empty string, a JSON number where a string was expected, garbage) falls back to a per-value
path that yields NULL for it instead of failing the batch. A number that parses but lies out
of range (an integer beyond its column, a float beyond a double, an epoch beyond the year 9999)
is NULL too, with a logged warning: never a wrong value, never a failed batch.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from tourneylake.api.tree import MalformedPayload, check_nesting
from tourneylake.schemas import STR_MAP, TS

log = logging.getLogger("tourneylake.tables.normalize")

_F64 = pa.float64()
_I64 = pa.int64()
# Epoch seconds a time column keeps: the years 1 to 9999, what Python's datetime (and so
# every reader of the lake) can represent. Outside: NULL with a warning.
MIN_EPOCH_S = -62_135_596_800  # 0001-01-01T00:00:00Z
MAX_EPOCH_S = 253_402_300_799  # 9999-12-31T23:59:59Z


def text(value: Any) -> str | None:
    """A served scalar as a string (attributes are strings; a few text elements are numbers)."""
    if value is None:
        return None
    if type(value) is str:
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return None  # an element where a scalar was expected: not a value


def items(value: Any) -> list[Any]:
    """A repeatable child as a list: several → list, one → bare object, none/empty → []."""
    if type(value) is list:
        return value
    if value is None or value == "":
        return []
    return [value]


def str_array(values: Sequence[Any]) -> pa.Array:
    try:
        return pa.array(values, pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([text(v) for v in values], pa.string())


def _out_of_range(column: str | None, count: int, what: str) -> None:
    if count:
        log.warning("%s: %d value(s) %s read as NULL", column or "a column", count, what)


def finite(values: pa.Array) -> pa.Array:
    """Floats with every infinity and NaN (a number beyond a double, or an overflowing sum)
    turned NULL."""
    ok = pc.is_finite(values)
    if pc.all(ok).as_py() is False:
        return pc.if_else(ok, values, pa.scalar(None, values.type))
    return values


def _to_float(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _strings(values: Sequence[Any] | pa.Array) -> pa.Array:
    return values if isinstance(values, pa.Array) else pa.array(values, pa.string())


def _pylist(values: Sequence[Any] | pa.Array) -> Sequence[Any]:
    return values.to_pylist() if isinstance(values, pa.Array) else values


# A plain decimal number as the service writes it ("279", "-1.01", "0.20"); no nan/inf/hex.
_NUMBER_RE = r"^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$"
_INT_RE = r"^[-+]?\d+$"


def float_array(values: Sequence[Any] | pa.Array, column: str | None = None) -> pa.Array:
    """Decimal strings → float64; anything that is not a plain number → NULL, and so is a
    number beyond a double ("1e400": the cast would give infinity).

    Data sets mix numbers with lists ("USD0,USD0.44,...") in one column, so unparseable values
    are masked out with one vectorised regex instead of failing the cast. A column the cast
    takes whole, every value finite, skips the regex: the cast refuses whatever the regex refuses
    except nan and infinities, which send the column the regex way (pinned by
    ``tests/tables/test_normalize.py``)."""
    try:
        strings = _strings(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([_to_float(v) for v in values], _F64)  # non-string scalars: rare
    try:
        whole = strings.cast(_F64)
    except pa.ArrowInvalid:
        whole = None
    if whole is not None and pc.all(pc.is_finite(whole)).as_py() is not False:
        return whole
    ok = pc.match_substring_regex(strings, _NUMBER_RE)
    numbers = pc.if_else(ok, strings, pa.scalar(None, pa.string())).cast(_F64)
    checked = finite(numbers)
    if checked is not numbers:
        _out_of_range(column, checked.null_count - numbers.null_count, "beyond a double")
    return checked


_INT_TEXT = re.compile(r"[-+]?\d+")


def _to_int(value: Any) -> int | None:
    """A served value as an integer: an integer string or number exactly (a float would round
    one beyond 2**53), any other number truncated; else ``None``."""
    if type(value) is int:
        return value
    if type(value) is str and _INT_TEXT.fullmatch(value.strip()):
        try:
            return int(value)
        except ValueError:  # more than 4,300 digits: Python refuses, and no column holds it
            return None
    number = _to_float(value)
    if number is None:
        return None
    try:
        return int(number)
    except (OverflowError, ValueError):
        return None


def int_array(
    values: Sequence[Any] | pa.Array,
    dtype: pa.DataType = _I64,
    column: str | None = None,
    *,
    bounds: tuple[int, int] | None = None,
) -> pa.Array:
    """Integer strings → int; anything else that is a number is truncated; else NULL. A number
    beyond ``dtype`` (or ``bounds``) is NULL, with a warning."""
    try:
        strings = _strings(values)
        # ASCII digits only (the usual column, 3x cheaper to check than the regex, which also
        # takes a sign): the cast alone decides (it refuses a value beyond ``dtype``)
        if pc.all(pc.ascii_is_decimal(strings)).as_py() is not False:
            return strings.cast(dtype)
        if pc.all(pc.match_substring_regex(strings, _INT_RE)).as_py() is not False:
            return strings.cast(dtype)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        pass
    out = [_to_int(v) for v in _pylist(values)]
    lo, hi = bounds or ((-(2**31), 2**31 - 1) if dtype == pa.int32() else (-(2**63), 2**63 - 1))
    kept = [v if v is None or lo <= v <= hi else None for v in out]
    _out_of_range(column, sum(1 for v in out if v is not None) - sum(1 for v in kept if v is not None), "out of range")
    return pa.array(kept, dtype)


def time_array(values: Sequence[Any] | pa.Array, column: str | None = None) -> pa.Array:
    """Epoch seconds (strings) → timestamp[s, UTC]; outside the years 1–9999 → NULL, with a
    warning."""
    seconds = int_array(values, column=column, bounds=(MIN_EPOCH_S, MAX_EPOCH_S))
    in_range = pc.and_(pc.greater_equal(seconds, MIN_EPOCH_S), pc.less_equal(seconds, MAX_EPOCH_S))
    if pc.all(in_range).as_py() is False:
        kept = pc.if_else(in_range, seconds, pa.scalar(None, _I64))
        _out_of_range(column, kept.null_count - seconds.null_count, "outside the years 1-9999")
        seconds = kept
    return seconds.cast(TS)


def epoch_in_range(seconds: float) -> bool:
    """Whether epoch seconds lie in the years 1–9999 (see ``time_array``)."""
    return MIN_EPOCH_S <= seconds <= MAX_EPOCH_S


def bool_array(values: Sequence[Any]) -> pa.Array:
    out: list[bool | None] = []
    for value in values:
        if value is None:
            out.append(None)
        elif isinstance(value, bool):
            out.append(value)
        else:
            out.append(str(value).strip().lower() == "true")
    return pa.array(out, pa.bool_())


def map_array(values: Sequence[Mapping[str, str | None]]) -> pa.Array:
    """dicts → MAP(VARCHAR, VARCHAR), built from flat key/value arrays (much faster than
    converting Python lists of pairs)."""
    offsets = [0]
    keys: list[str] = []
    items_: list[str | None] = []
    total = 0
    for value in values:
        keys.extend(value.keys())
        items_.extend(value.values())
        total += len(value)
        offsets.append(total)
    return pa.MapArray.from_arrays(
        pa.array(offsets, pa.int32()), pa.array(keys, pa.string()), pa.array(items_, pa.string()), type=STR_MAP
    )


def attributes(raw: Any) -> dict[str, str]:
    """Every ``@attribute`` of a raw element, as strings."""
    if type(raw) is not dict:
        return {}
    return {k[1:]: t for k, v in raw.items() if k[:1] == "@" and (t := text(v)) is not None}


def dumps(raw: Any, path: str = "a record") -> str:
    """A raw subtree as JSON text (``raw_json`` columns). Its nesting is checked first: orjson
    stops at 255 levels with a ``TypeError``, and an XML body could never be that deep."""
    check_nesting(raw, path)
    try:
        return orjson.dumps(raw, option=orjson.OPT_SORT_KEYS).decode()
    except orjson.JSONEncodeError as exc:  # a value JSON cannot hold (a tree not read by `tree`)
        raise MalformedPayload(f"{path}: cannot be written back as JSON ({type(exc).__name__})") from None


def epoch_seconds(value: datetime | int | float | str | None) -> int | None:
    """``fetched_at`` and friends: an aware datetime (naive = UTC) or epoch seconds."""
    if value is None:
        return None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return int(value.timestamp())
    return _to_int(value)


def repeat(value: Any, count: int, dtype: pa.DataType) -> pa.Array:
    import numpy as np

    return pa.array([value], dtype).take(np.zeros(count, dtype=np.int32))


def runs(values: Iterable[Any], counts: Sequence[int], dtype: pa.DataType) -> pa.Array:
    """Expand per-group values to per-row values (group i repeated counts[i] times)."""
    import numpy as np

    vals = values if isinstance(values, pa.Array) else pa.array(list(values), dtype)
    if len(vals) == 0:
        return pa.array([], dtype)
    counts_np = counts.to_numpy(zero_copy_only=False) if isinstance(counts, pa.Array) else np.asarray(counts, dtype=np.int64)
    index = np.repeat(np.arange(len(vals), dtype=np.int32), counts_np)
    return vals.take(pa.array(index))


def dict_runs(values: Sequence[Any], counts: Sequence[int] | pa.Array) -> pa.DictionaryArray:
    """Per-group values expanded to rows, dictionary-encoded (unique dictionary, NULL kept)."""
    import numpy as np

    codes: dict[Any, int] = {}
    index = [None if v is None else codes.setdefault(v, len(codes)) for v in values]
    counts_np = counts.to_numpy(zero_copy_only=False) if isinstance(counts, pa.Array) else np.asarray(counts, dtype=np.int64)
    rows = (
        pa.array(index, pa.int32()).take(np.repeat(np.arange(len(index), dtype=np.int32), counts_np))
        if index
        else pa.array([], pa.int32())
    )
    return pa.DictionaryArray.from_arrays(rows, str_array(list(codes)))


def usd(amount: pa.Array, rate: pa.Array) -> pa.Array:
    """amount / rate, NULL where either is NULL (a currency without a rate) or the quotient overflows."""
    return finite(pc.divide(amount, rate))


def rate_missing(amounts: Iterable[pa.Array], rate: pa.Array) -> pa.Array:
    """True where some amount needed a conversion and the rate is unknown."""
    needed = None
    for amount in amounts:
        valid = pc.is_valid(amount)
        needed = valid if needed is None else pc.or_(needed, valid)
    assert needed is not None
    return pc.and_(needed, pc.is_null(rate)).fill_null(False)
