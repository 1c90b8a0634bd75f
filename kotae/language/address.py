"""Names a comment calls someone by: the host's persona, a guest, a member of staff.

A viewer who writes ミオちゃんこんにちは or 手話通訳さん、いつもありがとう speaks *to* someone; the
name says whom, not what the comment is about. Left in, the name reads as a topic, and the
retriever finds the persona's own profile for a greeting. So the chatter rules read a comment
that asks nothing without the names it calls people by.

A name is the words before a suffix of address (``lexicon/address_suffixes.txt``: ちゃん, さん,
様 …), back to the previous particle, punctuation or the start: Sudachi splits a hiragana
name it does not know (ひばな as ひば + な), and the whole run is the name.

Example::

    >>> without_forms_of_address("ルカちゃんの声すき")
    'の声すき'
"""

from __future__ import annotations

from kotae.language import lexicon
from kotae.language.morphemes import morphemes

_SUFFIXES = lexicon.words("address_suffixes")
# Where a name called by its suffix begins: after these, or at the start.
_BOUNDARY = {"助詞", "補助記号", "空白", "記号"}


def without_forms_of_address(text: str) -> str:
    """``text`` (normalised) without each name followed by a suffix of address, suffix included."""
    words = morphemes(text)
    keep = [True] * len(words)
    for i, m in enumerate(words):
        if m.pos[0] != "接尾辞" or m.surface not in _SUFFIXES or i == 0:
            continue
        start = i
        while start > 0 and words[start - 1].pos[0] not in _BOUNDARY:
            start -= 1
        if start < i:  # a suffix with no name before it (さん alone) is left as it is
            keep[start : i + 1] = [False] * (i + 1 - start)
    return "".join(m.surface if k else " " for m, k in zip(words, keep, strict=True)).strip()
