"""The drift check's sample of a night's answers: spread over the night, from few segments."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from tourneylake.lake.segments import RawRef
from tourneylake.tables.drift import SAMPLED_SEGMENTS, drift_sample


def _night(segments: int, bodies_each: int) -> list[RawRef]:
    return [
        RawRef(date(2026, 3, 1), "player_summary", f"d{s}-{b}", "t", "ok", Path(f"/lake/_raw/seg-{s:04d}"), b * 100, 100)
        for s in range(segments)
        for b in range(bodies_each)
    ]


def test_a_large_night_is_sampled_from_a_few_segments_first_last_and_between() -> None:
    refs = _night(segments=60, bodies_each=35)
    picked = drift_sample(refs, 50)
    locations = list(dict.fromkeys(str(ref.location) for ref in picked))
    assert len(picked) == 50
    assert len(locations) == SAMPLED_SEGMENTS
    assert locations[0].endswith("seg-0000") and locations[-1].endswith("seg-0059")
    assert all(ref in refs for ref in picked) and len(set(picked)) == len(picked)


def test_a_small_night_is_read_whole_and_few_segments_give_all_they_hold() -> None:
    small = _night(segments=3, bodies_each=10)
    assert drift_sample(small, 50) == small
    few = _night(segments=2, bodies_each=40)  # 80 bodies in two segments: 50 of them, from both
    picked = drift_sample(few, 50)
    assert len(picked) == 50 and {str(ref.location) for ref in picked} == {str(ref.location) for ref in few}
