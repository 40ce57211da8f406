"""The console script ``tourneylake``: a ``run`` handed to the standby when one waits (see
:mod:`pipelines.standby`), else the command line in this process.

It imports only the standard library until it knows which: handing a night over costs a few
milliseconds, and the command line's own imports are paid only where it runs.
"""

from __future__ import annotations

import sys

from pipelines.standby import forward

__all__ = ["main"]

#: The commands a standby runs (the others load little and start fast on their own).
FORWARDED = frozenset({"run"})


def main() -> None:
    """``tourneylake``: forwarded or run here."""
    arguments = sys.argv[1:]
    if arguments[:1] and arguments[0] in FORWARDED:
        status = forward(arguments)
        if status is not None:
            raise SystemExit(status)
    from pipelines.cli import main as in_this_process

    in_this_process()


if __name__ == "__main__":  # pragma: no cover
    main()
