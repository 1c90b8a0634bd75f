"""BM25 over knowledge-base chunks (bm25s), with validity-date filtering.

Besides the BM25 score used for ranking, each hit carries ``coverage``: the
IDF-weighted share of the query's terms found in the chunk. Unlike BM25 it lies
in [0, 1] whatever the size of the knowledge base, which makes it a usable gate:
a comment whose rare words are nowhere in the knowledge base scores low.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from datetime import date

import bm25s
import numpy as np

from kotae.knowledge.store import Chunk
from kotae.knowledge.text import search_tokens


@dataclass(frozen=True)
class Hit:
    chunk: Chunk
    score: float
    coverage: float


class LexicalIndex:
    """BM25 index over a list of chunks.

    Example::

        index = LexicalIndex(store.chunks())
        hits = index.search("保育料はいくら？", day=date.today(), top_k=5)
    """

    def __init__(self, chunks: list[Chunk]) -> None:
        self.chunks = chunks
        self.tokens = [search_tokens(c.text if c.kind == "faq" else f"{c.record.title}\n{c.text}") for c in chunks]
        self.token_sets = [set(t) for t in self.tokens]
        self.df: Counter[str] = Counter(tok for toks in self.token_sets for tok in toks)
        self.bm25: bm25s.BM25 | None = None
        if chunks:
            self.bm25 = bm25s.BM25()
            self.bm25.index(self.tokens, show_progress=False)

    def idf(self, token: str) -> float:
        n = len(self.chunks)
        df = self.df.get(token, 0)
        return math.log(1.0 + (n - df + 0.5) / (df + 0.5))

    def coverage(self, query: list[str], i: int) -> float:
        terms = set(query)
        total = sum(self.idf(t) for t in terms)
        if total <= 0:
            return 0.0
        return sum(self.idf(t) for t in terms if t in self.token_sets[i]) / total

    def search(self, text: str, *, day: date, top_k: int, kind: str | None = None) -> list[Hit]:
        """Best ``top_k`` chunks valid on ``day`` (and of ``kind`` when given), best first."""
        query = search_tokens(text)
        if not query or self.bm25 is None:
            return []
        known = [t for t in query if t in self.df]
        if not known:
            return []
        scores = np.asarray(self.bm25.get_scores(known), dtype=float)
        mask = np.array([c.valid_on(day) and (kind is None or c.kind == kind) for c in self.chunks])
        scores = np.where(mask, scores, -1.0)
        order = np.argsort(-scores, kind="stable")[:top_k]
        return [
            Hit(self.chunks[i], float(scores[i]), self.coverage(query, i))
            for i in order
            if scores[i] > 0
        ]
