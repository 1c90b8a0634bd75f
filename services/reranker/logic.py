"""What the reranker does: keep the relevant documents, most relevant first.

The top-1 document decides the slide shown on stream. This module holds the
offline method, ``keep_top_n``: it keeps retrieval's order and the first
``KOTAE_TOP_N`` documents. Model-based reranking (a JSON list of relevant ids)
plugs in beside it as another method.
"""

from __future__ import annotations

from dataclasses import dataclass

from kotae.contracts import Evidence, RetrievalV1

METHOD = "keep_top_n"


@dataclass(frozen=True)
class Reranked:
    docs: list[Evidence]
    method: str
    degraded: bool = False

    @property
    def slide(self) -> int | str | None:
        return self.docs[0].slide if self.docs else None


def keep_top_n(retrieval: RetrievalV1, n: int) -> Reranked:
    """The first ``n`` documents in retrieval order."""
    return Reranked(docs=list(retrieval.docs[:n]), method=METHOD)


def apply_selection(docs: list[Evidence], ids: list[object]) -> list[Evidence]:
    """Documents picked by 1-based ``ids``, in that order; unknown or repeated ids are dropped."""
    picked: list[Evidence] = []
    seen: set[int] = set()
    for raw in ids:
        if isinstance(raw, bool) or not isinstance(raw, int):
            continue
        if 1 <= raw <= len(docs) and raw not in seen:
            seen.add(raw)
            picked.append(docs[raw - 1])
    return picked
