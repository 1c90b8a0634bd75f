"""Lexical signals as sparse vectors, so Qdrant scores BM25 itself.

Two fields per chunk: ``words`` (Sudachi content words, see :mod:`kotae.language.text`)
and ``chars`` (character unigrams and bigrams of the normalised text, which meet
compounds that a word tokenizer keeps whole: バス in コミュニティバス). A chunk's
value for a term is BM25's saturated term frequency; the collection applies the
IDF (Qdrant's ``Modifier.IDF``), and a query gives 1.0 to each of its terms, so
the score is BM25.

Characters found in most chunks (the particles の, は, が …) carry almost no IDF but
have the longest posting lists, so at query time they cost most of a ``chars``
search and decide nothing; :func:`common_terms` names them once per index so that
queries can leave them out.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass
from itertools import chain, pairwise

from kotae.language.text import normalize, search_tokens

FIELDS = ("words", "chars")
# A term in more than this share of the chunks is "common" (chosen on the even-numbered
# JSQuAD questions: recall unchanged, a third of the posting lists to read) ...
COMMON_SHARE = 0.5
# ... but only in a knowledge base of at least this many chunks: in a small one every
# term may still tell chunks apart, and searching it is cheap anyway.
COMMON_FROM_CHUNKS = 500


def term_id(term: str) -> int:
    """A stable 31-bit id for a term (no vocabulary file to keep in sync)."""
    return int.from_bytes(hashlib.blake2b(term.encode(), digest_size=4).digest(), "big") & 0x7FFFFFFF


def char_terms(text: str) -> list[str]:
    """Character unigrams and bigrams of the normalised text, spaces and punctuation dropped."""
    chars = [c for c in normalize(text).lower() if c.isalnum()]
    return chars + [a + b for a, b in pairwise(chars)]


def terms(field: str, text: str) -> list[str]:
    return search_tokens(text) if field == "words" else char_terms(text)


@dataclass(frozen=True)
class Bm25Params:
    k1: float = 0.5
    b: float = 0.9


def doc_vector(tokens: list[str], avgdl: float, p: Bm25Params) -> tuple[list[int], list[float]]:
    """BM25 document-side weights (tf saturation and length normalisation)."""
    counts = Counter(tokens)
    dl = len(tokens)
    norm = p.k1 * (1 - p.b + p.b * dl / max(avgdl, 1e-9))
    merged: dict[int, float] = {}
    for term, tf in counts.items():
        idx = term_id(term)
        merged[idx] = merged.get(idx, 0.0) + tf * (p.k1 + 1) / (tf + norm)
    return list(merged), list(merged.values())


def common_terms(
    token_lists: list[list[str]], share: float = COMMON_SHARE, min_chunks: int = COMMON_FROM_CHUNKS
) -> list[str]:
    """Terms found in more than ``share`` of the chunks, when there are at least ``min_chunks``."""
    if len(token_lists) < min_chunks:
        return []
    df = Counter(chain.from_iterable(map(set, token_lists)))
    limit = share * len(token_lists)
    return sorted(t for t, d in df.items() if d > limit)


def query_vector(tokens: list[str]) -> tuple[list[int], list[float]]:
    ids = sorted({term_id(t) for t in tokens})
    return ids, [1.0] * len(ids)
