"""Latin-script words in a Japanese answer, in katakana, so a Japanese voice does not spell them out.

Open JTalk reads a Latin word it does not know letter by letter ("Minato
Loop" as "エムアイエヌエーティーオー…"). Here each word is split where its
case changes (``VTuber`` → ``V`` ``Tuber``, ``YouTube`` → ``You`` ``Tube``) and
each part is said as a Japanese reader would:

* an acronym (``DX``, ``SNS``, ``FSSC``) letter by letter, unless it is long and
  has vowels (``NASA``, ``VISA``: words);
* a Japanese name in Hepburn romaji (``Shiomi``, ``Kohoku``) syllable by syllable;
* any other word through e2k's character-to-katakana model (its weights are in
  the wheel; ``Loop`` → ループ), once per word and kept.
"""

from __future__ import annotations

import re
import threading
from functools import lru_cache
from typing import Any

from .kana import romaji_to_katakana

LETTERS = dict(
    zip(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
        "エー ビー シー ディー イー エフ ジー エイチ アイ ジェー ケー エル エム エヌ オー ピー キュー アール エス "
        "ティー ユー ブイ ダブリュー エックス ワイ ゼット".split(),
        strict=True,
    )
)
_VOWELS = set("AEIOU")
WORD = re.compile(r"(?<![A-Za-z])[A-Za-z]+(?:[-'][A-Za-z]+)*(?![A-Za-z])")
# Where a word's case changes: VTuber → V|Tuber, iPhone → i|Phone, SDGs stays whole (a plural acronym).
_PARTS = re.compile(r"[A-Z]+s(?![a-z])|[A-Z]+(?![a-z])|[A-Z]?[a-z]+")
_model_lock = threading.Lock()


@lru_cache(maxsize=1)
def _c2k() -> Any:
    from e2k import C2K

    return C2K()


@lru_cache(maxsize=4096)
def english_katakana(word: str) -> str:
    """An English word as katakana, from e2k's model (``"loop"`` → ``"ループ"``)."""
    with _model_lock:  # the model keeps its state in numpy buffers: one word at a time
        return str(_c2k()(word.lower()))


def _acronym(part: str) -> str:
    plural = part.endswith("s") and len(part) > 2
    letters = part[:-1] if plural else part
    if len(letters) >= 4 and _VOWELS & set(letters):
        return english_katakana(letters)  # NASA, VISA, JAXA: said as words
    return "".join(LETTERS[c] for c in letters) + ("ズ" if plural else "")


def _part(part: str) -> str:
    if part.isupper() or (part[:-1].isupper() and part.endswith("s") and len(part) > 2):
        return _acronym(part)
    if part == "i":
        return "アイ"  # iPhone, iOS
    return english_katakana(part)


def _romaji_name(piece: str) -> str | None:
    """A Japanese name in romaji (``Shiomi``): three kana or more, so short English words (``Home``) are not."""
    if piece.isupper():
        return None
    kana = romaji_to_katakana(piece)
    return kana if kana is not None and len(kana) >= 3 else None


def latin_katakana(word: str) -> str:
    """One Latin-script word (hyphens allowed) as a Japanese voice should say it.

    ``"VTuber"`` → ``"ブイチューバー"``, ``"Shiomi-cho"`` → ``"シオミチョ"``, ``"DX"`` → ``"ディーエックス"``.
    """
    pieces = [p for p in re.split(r"[-']", word) if p]
    named = any(_romaji_name(p) for p in pieces)  # "cho" in "Shiomi-cho" is romaji too
    out = []
    for piece in pieces:
        kana = _romaji_name(piece) or (romaji_to_katakana(piece) if named and not piece.isupper() else None)
        if kana is not None:
            out.append(kana)
        else:
            out.extend(_part(p) for p in _PARTS.findall(piece))
    return "".join(out)
