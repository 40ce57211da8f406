"""The root of every error tourneylake raises on purpose.

Callers (the CLI, the Dagster assets, a notebook) catch :class:`TourneylakeError` to tell "the
input or the service said no" from a bug. Errors that are also a ``ValueError`` (bad settings,
filters, watchlists, payloads) keep that mix-in, because callers and tests rely on it.

The service's own errors (``tourneylake.api.errors``) and the others derive from here; this
module imports nothing of ours, so every room can use it.
"""

from __future__ import annotations

import os
import re


class TourneylakeError(Exception):
    """Base of every error tourneylake raises on purpose."""


class ConfigError(TourneylakeError, ValueError):
    """A setting is missing or malformed; the message names the variable."""


class RunFailed(TourneylakeError):
    """The night cannot go on (wrong credentials, for example); the message is one line."""


class BudgetRefused(TourneylakeError):
    """The run's budget does not allow another metered call (cap, reserve, or a quota stop)."""


class LakeError(TourneylakeError, RuntimeError):
    """A lake operation that cannot proceed."""


class LakeSourceMismatch(LakeError):
    """The data directory holds data from another source (synthetic vs live never mix)."""


_SECRET_ENV = re.compile(r"SECRET|TOKEN|PASSWORD|CREDENTIAL|KEY", re.IGNORECASE)


def one_line(exc: BaseException) -> str:
    """An exception's text on one line, with any secret of the environment masked."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    for name, value in os.environ.items():
        if value and len(value) >= 6 and _SECRET_ENV.search(name) and value in text:
            text = text.replace(value, "***")
    return text
