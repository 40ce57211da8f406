"""The sandbox: a faithful, deterministic local emulation of the statistics service.

For development, tests, demos and benchmarks; its behaviour is in ``docs/reference/sandbox.md``::

    with running_sandbox(seed=7, today="2026-03-01") as sandbox:
        sandbox.base_url                       # http://127.0.0.1:<port>; resources under /api/demo/...
        truth(sandbox.world, "PokerStars", "Borbas.Geri", "Class:SNG")  # what the summary serves (.truth)
        sandbox.world.set_today("2026-03-02")  # night 2: the players have played another day
        sandbox.app.summary_requests           # every summary request it saw

The demo account (:data:`DEMO`: app ``demo``, key ``sandboxkey2026``, ``analyst@example.com`` /
``correct-horse-battery``) is public; :data:`FREE` is a non-subscriber. Errors the sandbox raises
on purpose derive from :class:`~tourneylake.errors.TourneylakeError`.
"""

from tourneylake.api.client import encode_password
from tourneylake.sandbox.accounts import DEMO, FREE, Accounts
from tourneylake.sandbox.app import Costs
from tourneylake.sandbox.faults import Faults, FaultSpecError
from tourneylake.sandbox.server import NotLoopback, SandboxServer, SandboxStartError, running_sandbox, serve_forever
from tourneylake.sandbox.world import World

__all__ = [
    "DEMO",
    "FREE",
    "Accounts",
    "Costs",
    "FaultSpecError",
    "Faults",
    "NotLoopback",
    "SandboxServer",
    "SandboxStartError",
    "World",
    "encode_password",
    "running_sandbox",
    "serve_forever",
]
