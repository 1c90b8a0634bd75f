"""Sudachi's reading of Japanese text, made once per text: the one tokenizer of the language layer.

Sudachi finds one path of words through a text and only then cuts each word to the length a
reader asks for: its longest units (mode C: 消費税, 初乗り運賃), middle units (mode B: 初乗り +
運賃) or shortest (mode A: 消費 + 税). So a text is tokenized once, in mode C, and each word
carries its own middle and short units: search tokens, key terms, a sentence's analysis and
the records' vocabulary all read the same words, and none of them runs the tokenizer again.

The words are plain frozen values, cached by text and shared between threads (a Sudachi
tokenizer is not thread-safe; each thread gets its own, and none of its objects leaves here).

Example::

    >>> [m.surface for m in morphemes("初乗り運賃と消費税")]
    ['初乗り運賃', 'と', '消費税']
    >>> [u.surface for u in morphemes("初乗り運賃と消費税")[0].middle]
    ['初乗り', '運賃']
    >>> [u.surface for u in morphemes("初乗り運賃と消費税")[2].units("A")]
    ['消費', '税']
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from sudachipy import Dictionary, SplitMode

_local = threading.local()


def _tokenizer() -> Any:
    tok = getattr(_local, "tokenizer", None)
    if tok is None:
        tok = _local.tokenizer = Dictionary(dict="core").tokenizer(mode=SplitMode.C)
    return tok


@dataclass(frozen=True, slots=True, eq=False)
class Morpheme:
    """One word as Sudachi reads it. ``middle`` and ``short`` hold its mode B and mode A units,
    and are empty when the word is one unit at that length (as Sudachi's own split says)."""

    surface: str
    pos: tuple[str, ...]
    form: str  # Sudachi's normalised form: 1万5千 → 15000, 附属 → 付属
    reading: str  # katakana
    oov: bool
    synonyms: tuple[int, ...]
    middle: tuple[Morpheme, ...] = ()
    short: tuple[Morpheme, ...] = ()

    def units(self, mode: Literal["B", "A"]) -> tuple[Morpheme, ...]:
        """The word at mode B or A length: its units, or itself when it is one."""
        return (self.middle if mode == "B" else self.short) or (self,)


def _word(m: Any, depth: int) -> Morpheme:
    """``m`` as a plain value; ``depth`` 2 for a mode C word (B and A units), 1 for a B unit (A units)."""
    surface = m.surface()
    splits = len(surface) > 1  # one character is one unit at every length: no need to ask Sudachi
    middle = tuple(_word(u, 1) for u in m.split(SplitMode.B)) if depth == 2 and splits else ()
    short = tuple(_word(u, 0) for u in m.split(SplitMode.A)) if depth >= 1 and splits else ()
    return Morpheme(
        surface,
        tuple(m.part_of_speech()),
        m.normalized_form(),
        m.reading_form(),
        m.is_oov(),
        tuple(m.synonym_group_ids()),
        middle,
        short,
    )


@lru_cache(maxsize=50_000)
def morphemes(text: str) -> tuple[Morpheme, ...]:
    """The words of ``text`` (already normalised) in Sudachi's longest units, each with its shorter units."""
    return tuple(_word(m, 2) for m in _tokenizer().tokenize(text))


def units(text: str, mode: Literal["B", "A"]) -> list[Morpheme]:
    """The words of ``text`` at mode B or A length, in order."""
    return [u for m in morphemes(text) for u in m.units(mode)]
