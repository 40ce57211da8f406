"""The sandbox: a faithful, deterministic local emulation of the statistics service.

Use it for development, tests, demos and benchmarks (design §6)::

    from tourneylake.sandbox import DEMO, running_sandbox

    with running_sandbox(seed=7, today="2026-03-01") as sandbox:
        sandbox.base_url          # http://127.0.0.1:<port>; resources under /api/demo/...
        truth(sandbox.world, "PokerStars", "Borbas.Geri", "Class:SNG")   # tourneylake.sandbox.truth: what the summary serves
        sandbox.accounts.set_remaining(DEMO.username, 3)
        sandbox.world.set_today("2026-03-02")                            # night 2
        sandbox.app.summary_requests     # every summary request it saw (user, network, player, filter)
        sandbox.accounts.peak_in_flight(DEMO.username)   # most requests in flight at once

Money is converted at the rates of each tournament's own UTC start day, so a summary with an
absolute ``Date:<start>~<end>`` filter is the same whichever day it is asked on; only metadata
publishes the serving day's rates. Errors the sandbox raises on purpose derive from
:class:`~tourneylake.errors.TourneylakeError`.

Modules: :mod:`.world` (synthetic players, tournaments, rates), :mod:`.stats` (statistics),
:mod:`.filtering` (filter semantics), :mod:`.metadata`, :mod:`.catalog` (countries, news),
:mod:`.nlq`, :mod:`.handanalysis`, :mod:`.accounts`, :mod:`.faults`, :mod:`.responses`,
:mod:`.app` (HTTP behaviour, error codes, cache marker), :mod:`.server`.

The demo account (:data:`DEMO`) is public: app ``demo``, key ``sandboxkey2026``, user
``analyst@example.com``, password ``correct-horse-battery`` (a subscriber; daily quota 100000 by
default). :data:`FREE` (``free@example.com`` / ``free-password``) is a non-subscriber with 10
searches a day.
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
