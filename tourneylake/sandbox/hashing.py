"""Cheap, stable pseudo-random numbers derived from integers.

The world is generated lazily and must give the same answer whichever order it is asked in, so
every random choice is a pure function of (seed, what, which). ``random.Random`` seeded per
choice would be too slow for thousands of summaries a second; one splitmix64 finaliser over a
linear combination of the parts is a handful of integer operations and is stable across Python
versions and processes (unlike ``hash()`` of strings).
"""

from __future__ import annotations

_MASK = (1 << 64) - 1
_K = (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0xD6E8FEB86659FD93, 0xFF51AFD7ED558CCD)


def mix(*parts: int) -> int:
    """A well-mixed 64-bit value from up to five integers."""
    x = 0
    for k, part in zip(_K, parts, strict=False):
        x = (x + part * k) & _MASK
        x ^= x >> 29
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def unit(*parts: int) -> float:
    """A float in [0, 1) from integers."""
    return (mix(*parts) >> 11) * (1.0 / (1 << 53))
