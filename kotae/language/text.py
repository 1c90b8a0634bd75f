"""Text handling shared by ingest, retrieval and the checks: normalisation,
sentence splitting and search tokens for Japanese and English.

Japanese goes through Sudachi (a morphological analyser whose dictionary ships
on PyPI) and is reduced to normalised forms of content words, so 保育料 in a
comment and 保育料 in a policy meet however they were written, and 1万5千 meets
15000. Latin-script runs are lower-cased words reduced to their lemmas (buses → bus).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from functools import lru_cache

import simplemma

from kotae.knowledge.records import detect_lang
from kotae.language import lexicon
from kotae.language.morphemes import units

_CONTENT_POS = {"名詞", "動詞", "形容詞", "形状詞"}
_JA_STOP = lexicon.words("search_stop_ja")
_EN_STOP = lexicon.words("search_stop_en")
#: English words that name nothing (a question's frame, pronouns, light verbs).
EN_STOPWORDS = _EN_STOP
_LATIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9'\-\.]*")
_SPLIT_LATIN = re.compile(r"([A-Za-z][A-Za-z0-9'\-]*(?:\s+[A-Za-z][A-Za-z0-9'\-]*)*)")
_WS = re.compile(r"\s+")
# Chat spellings that mean nothing for search: laughter, stretched vowels.
# Laughter (w, ww…) only where it is not the end of a Latin word: "ほんと?w" loses it, "law" keeps it.
_CHAT_NOISE = re.compile(r"(?:(?<![A-Za-z])[wW]{2,}|(?<![A-Za-z])w$|[〜~ー]{2,}|[!?]{2,})")


def normalize(text: str) -> str:
    """NFKC (full/half width), collapsed whitespace, chat noise trimmed."""
    text = unicodedata.normalize("NFKC", text)
    text = _CHAT_NOISE.sub(lambda m: m.group(0)[0] if m.group(0)[0] in "!?〜~ー" else "", text)
    return _WS.sub(" ", text).strip()


@lru_cache(maxsize=50_000)
def stem(word: str) -> str:
    """A lower-case English word's lemma (simplemma's dictionary, shipped in its wheel): buses → bus,
    prizes → prize, cities → city, launches → launch. The one stemmer of the language layer, so
    search tokens and sentence analysis read a plural or an inflected verb alike."""
    return simplemma.lemmatize(word, lang="en").lower()


def _latin_tokens(run: str) -> list[str]:
    out = []
    for m in _LATIN.finditer(run):
        word = m.group(0).lower().strip("'.-")
        if not word or word in _EN_STOP or (len(word) == 1 and not word.isdigit()):
            continue
        out.append(stem(word))
    return out


def _japanese_tokens(run: str) -> list[str]:
    out: list[str] = []
    for m in units(run, "B"):
        if m.pos[0] not in _CONTENT_POS:
            continue
        form = m.form
        if form in _JA_STOP or not form.strip():
            continue
        if form.isdigit():
            out.append(form)  # Sudachi reads 1万5千 as 15000
            continue
        if form.isascii():
            out += _latin_tokens(m.surface)
            continue
        out.append(form)
        # Compounds also index their short units (バス代 → バス, 代), so a
        # differently compounded word still meets its parts.
        if len(m.short) > 1:
            out += [p.form for p in m.short if p.pos[0] in _CONTENT_POS and p.form not in _JA_STOP]
    return out


@lru_cache(maxsize=50_000)
def _tokens_cached(text: str) -> tuple[str, ...]:
    tokens: list[str] = []
    for i, run in enumerate(_SPLIT_LATIN.split(text)):
        if not run.strip():
            continue
        tokens += _latin_tokens(run) if i % 2 == 1 else _japanese_tokens(run)
    return tuple(tokens)


def search_tokens(text: str) -> list[str]:
    """Content-word tokens of ``text`` for lexical search (Japanese and English)."""
    return list(_tokens_cached(normalize(text)))


_LEADING_MARKERS = re.compile(r"^((?:\[\d+\])+)\s*")
_SENTENCE_END = re.compile(r"(?<=[。．！？!?])\s*|(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])|\n+")


def split_sentences(text: str) -> list[str]:
    """Sentences of Japanese or English text, trailing citation markers kept with their sentence."""
    pieces = [p.strip() for p in _SENTENCE_END.split(text) if p and p.strip()]
    out: list[str] = []
    for piece in pieces:
        # Markers written after the full stop ("…です。[2]") belong to the sentence before.
        lead = _LEADING_MARKERS.match(piece)
        if out and lead:
            out[-1] += lead.group(1)
            piece = piece[lead.end() :].strip()
        if piece:
            out.append(piece)
    return out


# An English word's contraction or possessive ending (What's, I'm, Tokyo's, don't).
_CLITIC = re.compile(r"(?:'(?:s|re|m|ll|ve|d)|n't)$", re.I)
_IRREGULAR_CLITIC = {"can't": "can", "won't": "will", "shan't": "shall"}


def without_clitic(word: str) -> str:
    """``word`` without its contraction or possessive ending: What's → What, Tokyo's → Tokyo,
    don't → do. "What's the fare" asks with a wh-word, and Tokyo's names Tokyo."""
    irregular = _IRREGULAR_CLITIC.get(word.lower())
    if irregular:
        return irregular
    return _CLITIC.sub("", word) or word


_TO_KATAKANA = {code: code + 0x60 for code in range(ord("ぁ"), ord("ゖ") + 1)}


def katakana(text: str) -> str:
    """Hiragana written as katakana (the script of Sudachi's readings): ほちょうき → ホチョウキ."""
    return text.translate(_TO_KATAKANA)


def is_japanese(text: str) -> bool:
    return detect_lang(text) == "ja"


#: What follows a noun that a question sets aside (市役所のほかにどこで, 現金以外で, 土日を除いて).
_SET_ASIDE = tuple(tuple(mark.split()) for mark in lexicon.entries("search_set_aside"))


def set_aside(following: Sequence[str]) -> bool:
    """Whether the words ``following`` a noun set it aside: 市役所 in 期日前投票所は市役所のほかにどこに
    ありますか is what the answer is not about, so it is neither asked about nor needed in the records."""
    return any(tuple(following[: len(mark)]) == mark for mark in _SET_ASIDE)
