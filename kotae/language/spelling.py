"""Spellings as a viewer types them: a kana word that is a slip of a word the records write.

Chat is typed fast on a phone: a missing or extra dakuten (モッフパッド for モップパッド, フラチナ
for プラチナ), a small kana written large (ロホット, キャンヘーン), a kana typed twice or dropped
(ロボボット for ロボット). Such a slip is no dictionary word, so neither its reading nor its
character n-grams find it in a record. :func:`is_slip` says whether a kana spelling is such a slip of a
word, :func:`nearest` picks the one word of a list it is a slip of, :func:`folded_in` finds a slip of a
compound in running text.

Two rules, both about kana only (kanji and Latin letters are never matched this way):

- **the same kana but for dakuten, handakuten and small kana** (フ = プ = ブ, ツ = ッ), at least
  four kana: a slip of the finger;
- **one kana typed twice** (ロボボット), the word at least four kana: a key pressed twice. Any other
  kana more or less is another word as often as a slip (ゲームパス, a subscription, is not ゲームス
  with a kana added), so it is not matched.

Example::

    >>> is_slip("モッフパッド", "モップパッド"), is_slip("ロボボット", "ロボット"), is_slip("ゲームパス", "ゲームス")
    (True, True, False)
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from kotae.language.text import katakana

_KANA = re.compile(r"^[\u3041-\u3096\u30a1-\u30faー]+$")
_KATAKANA = re.compile(r"^[\u30a1-\u30faー]+$")
_SMALL = str.maketrans("ァィゥェォッャュョヮヵヶ", "アイウエオツヤユヨワカケ")
_MARKS = {"\u3099", "\u309a"}  # combining dakuten and handakuten
#: Fewest kana of a word that a slip is matched to: shorter ones are too many alike (バス, パス).
FOLD_MIN = 4


def fold(kana: str) -> str:
    """``kana`` in katakana without dakuten, handakuten or small kana: what a slip of them leaves."""
    bare = "".join(ch for ch in unicodedata.normalize("NFD", katakana(kana)) if ch not in _MARKS)
    return unicodedata.normalize("NFC", bare).translate(_SMALL)


def _doubled(written: str, word: str) -> bool:
    """``written`` is ``word`` with one of its kana typed twice (ロボボット for ロボット)."""
    if len(written) != len(word) + 1:
        return False
    i = next((i for i, (x, y) in enumerate(zip(word, written, strict=False)) if x != y), len(word))
    return written[i + 1 :] == word[i:] and i > 0 and written[i] == written[i - 1]


def is_slip(written: str, word: str) -> bool:
    """Whether the kana ``written`` is a slip of the kana ``word`` (see the module docstring)."""
    if written == word or not (_KANA.match(written) and _KANA.match(word)):
        return False
    if katakana(written) == katakana(word):
        return True  # the same word in the other kana: not a slip but a spelling, and a match
    if len(word) < FOLD_MIN:
        return False
    return fold(written) == fold(word) or _doubled(katakana(written), katakana(word))


def nearest(written: str, words: Iterable[str]) -> str | None:
    """The one word of ``words`` that ``written`` is a slip of; None when none is, or more than one."""
    if not _KANA.match(written) or len(written) < FOLD_MIN - 1:
        return None
    found = {w for w in words if abs(len(w) - len(written)) <= 1 and is_slip(written, w)}
    return found.pop() if len(found) == 1 else None


def folded_in(written: str, text: str) -> bool:
    """Whether the katakana ``written`` (five kana or more) stands in ``text`` but for dakuten,
    handakuten and small kana: a compound typed with a slip (コラホカフェ in …コラボカフェでは…), which no
    single word of the text is."""
    if len(written) < FOLD_MIN + 1 or not _KATAKANA.match(written) or written in text:
        return False
    return fold(written) in fold(text)
