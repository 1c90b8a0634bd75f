"""What the retriever does: find the evidence for a comment and gate on it.

BM25 over the comment's knowledge base (Sudachi tokens for Japanese, words for
English), only over chunks valid on the comment's date, documents and FAQ
searched separately. The gate looks at the best hit's coverage (the share of
the comment's IDF weight that the hit contains): ``answer`` at or above
``KOTAE_GATE_ANSWER``, ``clarify`` in the grey zone, ``no_match`` below.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date

from kotae.bus.edge import TransientError
from kotae.contracts import Evidence, FaqEvidence
from kotae.knowledge.lexical import Hit, LexicalIndex
from kotae.knowledge.store import KnowledgeStore
from kotae.settings import Settings

METHOD = "bm25"


class KnowledgeBaseMissing(TransientError):
    """No knowledge base is loaded under that name (yet): retried, then dead-lettered."""


@dataclass(frozen=True)
class Retrieval:
    gate: str
    top_score: float
    docs: list[Evidence] = field(default_factory=list)
    faq: list[FaqEvidence] = field(default_factory=list)
    method: str = METHOD

    def candidates(self, limit: int = 3) -> list[str]:
        """Distinct titles of the documents close to the best one, for asking back."""
        hits = [(d.title, d.score) for d in self.docs] or [(f.question, f.score) for f in self.faq]
        if not hits:
            return []
        best = max(score for _, score in hits)
        seen: list[str] = []
        for title, score in hits:
            if title and title not in seen and score >= 0.5 * best:
                seen.append(title)
        return seen[:limit]


def _evidence(hit: Hit) -> Evidence:
    r = hit.chunk.record
    return Evidence(
        doc_id=r.id,
        chunk_id=hit.chunk.chunk_id,
        title=r.title,
        text=hit.chunk.text,
        source=r.source,
        slide=r.slide,
        lang=r.language,
        version=r.version,
        valid_from=r.valid_from,
        valid_to=r.valid_to,
        score=round(hit.score, 4),
    )


def _faq(hit: Hit) -> FaqEvidence:
    r = hit.chunk.record
    return FaqEvidence(
        faq_id=r.id,
        question=r.question or "",
        answer=r.answer or "",
        source=r.source,
        slide=r.slide,
        lang=r.language,
        version=r.version,
        score=round(hit.score, 4),
    )


def _best_per_record(hits: list[Hit]) -> list[Hit]:
    seen: set[str] = set()
    out = []
    for hit in hits:
        if hit.chunk.doc_id not in seen:
            seen.add(hit.chunk.doc_id)
            out.append(hit)
    return out


class Retriever:
    """Searches the named knowledge bases under ``$KOTAE_DATA_DIR/kb``.

    The index of a knowledge base is rebuilt when its stored digest changes, so
    ``kotae kb load`` takes effect without restarting the stage.

    Example::

        retriever = Retriever(settings)
        result = retriever.retrieve("保育料はいくら？", kb="default", day=date.today())
        result.gate, [d.doc_id for d in result.docs]
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._indexes: dict[str, tuple[str, LexicalIndex]] = {}

    def index(self, kb: str) -> LexicalIndex:
        store = KnowledgeStore(self.settings.kb_dir, kb)
        digest = store.digest()
        if digest is None:
            raise KnowledgeBaseMissing(f"knowledge base {kb!r} is not loaded (run: kotae kb load PATH --name {kb})")
        cached = self._indexes.get(kb)
        if cached is None or cached[0] != digest:
            self._indexes[kb] = (digest, LexicalIndex(store.chunks()))
        return self._indexes[kb][1]

    def retrieve(self, text: str, *, kb: str, day: date) -> Retrieval:
        index = self.index(kb)
        overfetch = self.settings.top_k * 3
        docs = _best_per_record(index.search(text, day=day, top_k=overfetch, kind="doc"))[: self.settings.top_k]
        faq = index.search(text, day=day, top_k=self.settings.top_faq, kind="faq") if self.settings.top_faq else []
        best = max((h.coverage for h in docs[:1] + faq[:1]), default=0.0)
        if best >= self.settings.gate_answer:
            gate = "answer"
        elif best >= self.settings.gate_clarify:
            gate = "clarify"
        else:
            gate = "no_match"
        return Retrieval(
            gate=gate,
            top_score=round(best, 4),
            docs=[_evidence(h) for h in docs],
            faq=[_faq(h) for h in faq],
        )


def ask_back(candidates: list[str], lang: str) -> str:
    """The clarify reply: which of these topics did the viewer mean?"""
    if lang == "ja":
        if len(candidates) == 1:
            return f"「{candidates[0]}」についてのご質問でしょうか？"
        quoted = "、".join(f"「{c}」" for c in candidates)
        return f"{quoted}のどれについてのご質問でしょうか？"
    if len(candidates) == 1:
        return f"Do you mean \"{candidates[0]}\"?"
    return "Do you mean " + ", ".join(f'"{c}"' for c in candidates[:-1]) + f' or "{candidates[-1]}"?'
