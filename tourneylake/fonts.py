"""The fonts player names are drawn in, from the lock file, never from the machine.

Player names hold any script: ``王小明``, ``Łukasz``, ``Zoë``. DejaVu Sans (matplotlib's own font)
draws Latin, Greek and Cyrillic; Noto Sans CJK (the ``noto-cjk-sans-jp-regular`` wheel, a
dependency) draws Chinese, Japanese and Korean. :func:`matplotlib_families` registers the second
with matplotlib and names both, in that order, so a chart finds every glyph whatever is installed;
:func:`font_face_css` embeds in a web page the Noto glyphs of the names it shows (a subset of a few
kilobytes, made with fontTools), so the page draws them in any browser.
"""

from __future__ import annotations

import base64
import io
import unicodedata
from functools import cache
from pathlib import Path

__all__ = ["NAMES_FAMILY", "NAMES_FONT", "font_face_css", "matplotlib_families"]

#: The family name a report's pages give the embedded glyphs.
NAMES_FAMILY = "tourneylake names"


def _font_path() -> Path:
    from noto_cjk_sans_jp_regular import FONT_PATH

    return Path(str(FONT_PATH))


#: Noto Sans CJK JP (Regular): every CJK ideograph, kana and Hangul syllable.
NAMES_FONT = _font_path()


@cache
def matplotlib_families() -> list[str]:
    """matplotlib's font families for charts of names: DejaVu Sans, then Noto Sans CJK (registered
    from the wheel once a process) for the glyphs DejaVu lacks."""
    from matplotlib import font_manager

    font_manager.fontManager.addfont(str(NAMES_FONT))
    cjk = font_manager.FontProperties(fname=str(NAMES_FONT)).get_name()
    return ["DejaVu Sans", cjk]


@cache
def _cmap() -> frozenset[int]:
    from fontTools.ttLib import TTFont

    with TTFont(str(NAMES_FONT), lazy=True) as font:
        return frozenset(font.getBestCmap())


@cache
def font_face_css(text: str) -> str:
    """A CSS ``@font-face`` of family :data:`NAMES_FAMILY` holding the glyphs of ``text`` in the
    wide East Asian scripts (CJK ideographs, kana, Hangul: what DejaVu Sans lacks) that Noto Sans
    CJK draws, its OpenType data inline; ``""`` when there are none. A page names the family
    first: it holds only those glyphs, so every other character falls through to the next font."""
    wanted = "".join(sorted({c for c in text if unicodedata.east_asian_width(c) in "WF" and ord(c) in _cmap()}))
    if not wanted:
        return ""
    from fontTools import subset
    from fontTools.ttLib import TTFont

    options = subset.Options()
    options.name_IDs = ["*"]
    options.notdef_outline = True
    with TTFont(str(NAMES_FONT), lazy=True) as font:
        subsetter = subset.Subsetter(options)
        subsetter.populate(text=wanted)
        subsetter.subset(font)
        data = io.BytesIO()
        font.save(data)
    inline = base64.b64encode(data.getvalue()).decode("ascii")
    return f'@font-face{{font-family:"{NAMES_FAMILY}";src:url(data:font/otf;base64,{inline}) format("opentype")}}'
