"""The garbage collector paused, and frozen after start-up (tourneylake/runtime/collector.py). A
freeze is for good: it is tried in fresh interpreters, the test session's collector left alone."""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO
from tourneylake.runtime import collector

COLLECTOR = """
import gc, weakref
from tourneylake.runtime import collector

class Node:
    pass

def cycle():
    node = Node(); node.me = node
    return weakref.ref(node)

frozen_before = gc.get_freeze_count()
with collector.start_up():
    print("start-up, on:", gc.isenabled())
    kept = cycle()  # made at start-up: frozen with the rest
print("after start-up, on:", gc.isenabled(), "frozen more:", gc.get_freeze_count() > frozen_before)
later = cycle()  # made after: collected as usual
gc.collect()
print("start-up cycle alive:", kept() is not None, "later cycle alive:", later() is not None)
gc.disable()
with collector.start_up(), collector.paused():
    pass
print("off stays off:", not gc.isenabled())
"""

RUN_WITH_FREEZE_COUNT = """
import atexit, gc, sys
atexit.register(lambda: print("frozen", gc.get_freeze_count(), "dagster", "dagster" in sys.modules, file=sys.stderr))
sys.argv = ["tourneylake", *sys.argv[1:]]
from pipelines.cli import main
main()
"""


def test_paused_restores_the_collector_even_on_an_error() -> None:
    assert gc.isenabled()
    with collector.paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), collector.paused():
        raise RuntimeError
    assert gc.isenabled()
    gc.disable()
    try:
        with collector.paused():
            pass
        assert not gc.isenabled()  # the caller's choice is kept
    finally:
        gc.enable()


def test_start_up_restores_the_collector_and_freezes_what_it_made() -> None:
    done = subprocess.run([sys.executable, "-c", COLLECTOR], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "start-up, on: False",
        "after start-up, on: True frozen more: True",
        "start-up cycle alive: True later cycle alive: False",
        "off stays off: True",
    ]


@pytest.mark.slow
def test_a_night_freezes_dagsters_objects_out_of_the_collectors_passes(tmp_path: Path) -> None:
    """`tourneylake run` imports Dagster with the collector paused, then freezes what it made (four
    full passes walked those objects during the imports before)."""
    args = ["run", "--sandbox", "--date", "2026-11-20", "--data-dir", str(tmp_path), "--watchlist", "watchlist.yaml"]
    done = subprocess.run(
        [sys.executable, "-c", RUN_WITH_FREEZE_COUNT, *args], cwd=REPO, capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr[-3000:]
    frozen, count, dagster, imported = done.stderr.strip().splitlines()[-1].split()
    assert (frozen, dagster, imported) == ("frozen", "dagster", "True")
    assert int(count) > 100_000  # Dagster's objects, at least (none are frozen otherwise)
