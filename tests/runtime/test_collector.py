"""The garbage collector paused (tourneylake/runtime/collector.py)."""

from __future__ import annotations

import gc

import pytest

from tourneylake.runtime import collector


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
