"""Second stage of hybrid search: rescoring the fused candidates.

The first stage (:func:`kotae.knowledge.index.fuse`) sees each chunk only through
the searches that found it: a chunk outside the dense search's 30 has no cosine,
one outside the words search's 30 no word score, and BM25 rewards every repetition
of the article's own name. The second stage looks at each of the first stage's best
chunks (30 by default) in full — its stored dense vector, its stored words vector
and its text — and scores it by a weighted sum of features, each 0–1:

* ``fused``: the first-stage score, scaled by the best candidate's;
* ``dense``: the comment's embedding cosine to the chunk (for every candidate);
* ``coverage``: IDF-weighted share of the comment's words that the chunk holds;
* ``phrase``: share of the comment's character trigrams found in the chunk's
  title and text (phrases written the same way, particles included);
* ``title_named``: the chunk's title is written in the comment;
* ``same_title``: share of the candidates that carry the chunk's title (a comment
  about one topic finds many of that topic's chunks; a stray chunk that shares a
  word or two stands alone).

All of it is arithmetic on what the index already stores: no tokenising of
candidates, a few hundred microseconds for 30 of them.

Example::

    query = RescoreQuery.of("ラオスの首都は？", query_vector, meta)
    order = rescore(query, [Candidate(fused=1.0, title="ラオス", text="…", vector=v, words=ids), …])
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Protocol

import numpy as np

from kotae.knowledge.sparse import term_id
from kotae.language.text import search_tokens

FEATURES = ("fused", "dense", "coverage", "phrase", "title_named", "same_title")


@dataclass(frozen=True)
class RescoreWeights:
    """Weight of each feature; the rescored score is their weighted sum divided by the weights' total.

    Fitted on the even-numbered JSQuAD v1.3 validation questions (pairwise logistic
    regression of the gold chunk against the other candidates among the first 10,
    ``bench/rescoring.py``) and rounded; the odd-numbered ones are held out.
    """

    fused: float = 1.0
    dense: float = 4.3
    coverage: float = 5.9
    phrase: float = 5.1
    title_named: float = 1.2
    same_title: float = 2.2

    def vector(self) -> np.ndarray:
        w = np.array([getattr(self, f) for f in FEATURES], dtype=np.float32)
        return w / max(float(w.sum()), 1e-9)


class _IdfSource(Protocol):
    def idf(self, term: str) -> float: ...


@dataclass(frozen=True)
class RescoreQuery:
    """What the features need of the comment: its vector, its words' ids and IDF, its trigrams."""

    text: str  # letters and digits only (see _flat)
    vector: np.ndarray | None
    word_idf: dict[int, float] = field(default_factory=dict)
    trigrams: frozenset[str] = frozenset()

    @classmethod
    def of(cls, text: str, vector: np.ndarray | None, meta: _IdfSource) -> RescoreQuery:
        words = dict.fromkeys(search_tokens(text))
        flat = _flat(text)
        return cls(
            text=flat,
            vector=vector,
            word_idf={term_id(w): meta.idf(w) for w in words},
            trigrams=frozenset(flat[i : i + 3] for i in range(len(flat) - 2)),
        )


@dataclass(frozen=True)
class Candidate:
    """A first-stage hit as the second stage sees it."""

    fused: float  # first-stage score
    title: str
    text: str
    vector: np.ndarray | None  # the stored dense vector (None: cosine unknown, counted as 0)
    words: frozenset[int]  # term ids of the stored words vector


_NOT_WORD = re.compile(r"[\W_]+")


@lru_cache(maxsize=20_000)  # the same chunks come back for one topic's comments
def _flat(text: str) -> str:
    """Letters and digits only, full/half width folded, lower-cased: what a character match compares.

    Plain NFKC and one regex rather than :func:`normalize`: this runs on every candidate's text.
    """
    return _NOT_WORD.sub("", unicodedata.normalize("NFKC", text).lower())


def features(query: RescoreQuery, candidates: list[Candidate]) -> np.ndarray:
    """One row of :data:`FEATURES` per candidate."""
    if not candidates:
        return np.zeros((0, len(FEATURES)), dtype=np.float32)
    top = max(c.fused for c in candidates)
    total_idf = sum(query.word_idf.values())
    titles = Counter(c.title for c in candidates if c.title)
    rows = np.zeros((len(candidates), len(FEATURES)), dtype=np.float32)
    for i, c in enumerate(candidates):
        flat = _flat(f"{c.title}\n{c.text}")
        rows[i] = (
            c.fused / top if top > 0 else 0.0,
            float(np.dot(query.vector, c.vector)) if query.vector is not None and c.vector is not None else 0.0,
            sum(v for t, v in query.word_idf.items() if t in c.words) / total_idf if total_idf > 0 else 0.0,
            sum(1 for g in query.trigrams if g in flat) / len(query.trigrams) if query.trigrams else 0.0,
            float(bool(c.title) and _flat(c.title) in query.text),
            titles[c.title] / len(candidates) if c.title else 0.0,
        )
    return rows


def rescore(
    query: RescoreQuery, candidates: list[Candidate], weights: RescoreWeights = RescoreWeights()
) -> list[tuple[int, float]]:
    """(index into ``candidates``, rescored score) best first; ties keep the first-stage order."""
    if not candidates:
        return []
    scores = features(query, candidates) @ weights.vector()
    order = sorted(range(len(candidates)), key=lambda i: (-float(scores[i]), i))
    return [(i, float(scores[i])) for i in order]
