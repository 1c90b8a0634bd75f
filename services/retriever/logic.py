"""What the retriever does: find the evidence for a comment and gate on it.

Method ``hybrid``: three signals over the comment's knowledge base, all scored
by Qdrant — BM25 over Sudachi words, BM25 over character uni/bigrams, and the
embedding similarity — fused as a weighted sum of per-query max-scaled scores
(``KOTAE_FUSION_*``); then the best ``KOTAE_RESCORE_POOL`` fused chunks are read
in full and reordered by a second stage that sees each of them whole (its cosine,
the share of the comment's words and phrases it holds, whether its title is named;
see :mod:`kotae.knowledge.rescore`). Only chunks valid on the comment's date and of the
knowledge base its stream is bound to are searched (both are in the query's
filter). Documents and FAQ are searched separately. With
``KOTAE_FUSION_DENSE=0`` the dense search is skipped (it adds nothing to the
ranking on JSQuAD and costs two of the six searches); the comment is still
embedded and every hit kept still carries its cosine, read from its stored
vector, for the gate.

Before searching, the comment is put in the knowledge base's own words where it
can be (:meth:`kotae.language.terms.Vocabulary.rewrite`): a kana spelling of a word
the records write in kanji (ほちょうき → 補聴器), a homophone typo (臨界鉄道 → 臨海鉄道),
a synonym of a word the records lack (給料 → 給与). The gate
(:mod:`kotae.services.retriever.gate`) then decides whether the focus is covered at
all, answers, asks back between the topics that plausibly match, or lets the comment
go, and says why.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from kotae.contracts import Evidence, FaqEvidence, ModelCall
from kotae.faults import TransientError
from kotae.knowledge.embeddings import EmbeddingMismatch, embedder_for
from kotae.knowledge.index import (
    Backend,
    Hit,
    HybridSearcher,
    IndexMeta,
    IndexMissing,
    ServerBackend,
    Weights,
    open_embedded,
)
from kotae.knowledge.store import KnowledgeStore
from kotae.services.retriever.gate import Thresholds, decide
from kotae.services.retriever.gate_model import GateModel
from kotae.services.retriever.rewrite import QueryRewriter
from kotae.settings import Settings

METHOD = "hybrid"


class KnowledgeBaseMissing(TransientError):
    """No index for that knowledge base (yet): retried, then dead-lettered."""


class IndexModelMismatch(TransientError):
    """The index was built by another embedding model: retried (a reload may fix it), then dead-lettered."""


@dataclass(frozen=True)
class Retrieval:
    gate: str
    top_score: float
    docs: list[Evidence] = field(default_factory=list)
    faq: list[FaqEvidence] = field(default_factory=list)
    method: str = METHOD
    kb: str = "default"
    query: str | None = None  # the model's rewrite, when it was searched too
    prompt_version: str | None = None
    reason: str = ""  # why the gate decided so, as the outcome carries it
    candidates: list[str] = field(default_factory=list)  # the topics an ask-back names
    missing: list[str] = field(default_factory=list)  # the comment's specific terms no record has
    searched: str | None = None  # the comment in the knowledge base's words, when that differs
    calls: list[ModelCall] = field(default_factory=list)  # the rewrite's model call, when there was one


def evidence(hit: Hit) -> Evidence:
    p = hit.payload
    return Evidence(
        doc_id=p["doc_id"],
        chunk_id=p["chunk_id"],
        title=p.get("title") or "",
        text=p["text"],
        source=p.get("source"),
        slide=p.get("slide"),
        lang=p.get("lang"),
        version=p.get("version"),
        valid_from=p.get("valid_from"),
        valid_to=p.get("valid_to"),
        score=round(hit.score, 4),
    )


def faq_evidence(hit: Hit) -> FaqEvidence:
    p = hit.payload
    return FaqEvidence(
        faq_id=p["doc_id"],
        question=p.get("question") or "",
        answer=p.get("answer") or "",
        source=p.get("source"),
        slide=p.get("slide"),
        lang=p.get("lang"),
        version=p.get("version"),
        score=round(hit.score, 4),
    )


#: A document's second chunk is kept beside its best when it scores at least this share of the best:
#: the answer may stand in the next section (a campaign's B prize in 【賞品】, while the rule about
#: its A prize in 【注意事項】 scored a hair higher). Never more than two chunks of one document.
CLOSE_SIBLING = 0.9
MAX_CHUNKS_PER_DOCUMENT = 2


def best_per_document(hits: list[Hit]) -> list[Hit]:
    """The hits (best first) with each document's best chunk, and its next when that scores as well."""
    best: dict[str, float] = {}
    kept: dict[str, int] = {}
    out = []
    for hit in hits:
        top = best.get(hit.doc_id)
        if top is None:
            best[hit.doc_id], kept[hit.doc_id] = hit.score, 1
            out.append(hit)
        elif kept[hit.doc_id] < MAX_CHUNKS_PER_DOCUMENT and top > 0 and hit.score >= CLOSE_SIBLING * top:
            kept[hit.doc_id] += 1
            out.append(hit)
    return out


def _merge(first: list[Hit], second: list[Hit]) -> list[Hit]:
    best: dict[str, Hit] = {}
    for hit in first + second:
        key = hit.payload.get("chunk_id", "")
        if key not in best or hit.score > best[key].score:
            best[key] = hit
    return best_per_document(sorted(best.values(), key=lambda h: (-h.score, h.payload.get("chunk_id", ""))))


def gate_model_for(setting: str | None) -> GateModel | None:
    """The fitted gate a ``KOTAE_GATE_WEIGHTS`` setting names (None: the threshold rules)."""
    if not setting:
        return None
    if setting == "open":
        return GateModel.open_gate()
    return GateModel.load(None if setting == "fitted" else Path(setting))


class Retriever:
    """Searches the knowledge bases of ``$KOTAE_DATA_DIR/kb`` (embedded) or a Qdrant server.

    An embedded index is reopened when ``kotae kb load`` rebuilds it; a server
    index's metadata is re-read every few seconds. No restart needed.

    Example::

        retriever = Retriever(settings)
        result = retriever.retrieve("保育料はいくら？", kb="default", day=date.today())
        result.gate, [d.doc_id for d in result.docs]
    """

    META_REFRESH_S = 5.0

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.embedder = embedder_for(
            settings.embedding_model,
            api_key=settings.openai_api_key.get_secret_value() if settings.openai_api_key else None,
        )
        self.weights = Weights(words=settings.fusion_words, chars=settings.fusion_chars, dense=settings.fusion_dense)
        self.thresholds = Thresholds(
            answer=settings.gate_answer,
            clarify=settings.gate_clarify,
            strong=settings.gate_strong,
            ask_back=settings.gate_ask_back,
        )
        self.gate_model = gate_model_for(settings.gate_weights)
        self._searchers: dict[str, tuple[Any, HybridSearcher]] = {}
        self._manifests: dict[Path, tuple[tuple[int, int, int], str | None]] = {}
        self.rewriter = QueryRewriter.from_settings(settings)
        self._retired: list[tuple[float, Any]] = []
        self._server: Backend | None = None
        self._lock = threading.Lock()

    def _digest(self, store: KnowledgeStore) -> str | None:
        """The store's digest, read again only when its manifest file changed (a reload replaces it).

        Every comment asks, so a reload is seen by the next comment; a stat costs a
        fraction of reading and parsing the manifest.
        """
        try:
            st = store.manifest_path.stat()
        except OSError:
            return None
        key = (st.st_ino, st.st_mtime_ns, st.st_size)
        known = self._manifests.get(store.manifest_path)
        if known is not None and known[0] == key:
            return known[1]
        digest = store.digest()
        self._manifests[store.manifest_path] = (key, digest)
        return digest

    def _open(self, kb: str) -> HybridSearcher:
        if self.settings.qdrant_url:
            if self._server is None:
                key = self.settings.qdrant_api_key.get_secret_value() if self.settings.qdrant_api_key else None
                self._server = ServerBackend.connect(self.settings.qdrant_url, self.settings.qdrant_collection, key)
            cached = self._searchers.get(kb)
            if cached and time.monotonic() - cached[0] < self.META_REFRESH_S:
                return cached[1]
            meta = self._server.meta(kb)
            if meta is None:
                raise KnowledgeBaseMissing(
                    f"knowledge base {kb!r} is not in {self.settings.qdrant_url} (run: kotae kb load PATH --name {kb})"
                )
            searcher = self._searcher(self._server, meta)
            self._searchers[kb] = (time.monotonic(), searcher)
            return searcher
        store = KnowledgeStore(self.settings.kb_dir, kb)
        digest = self._digest(store)
        if digest is None:
            raise KnowledgeBaseMissing(f"knowledge base {kb!r} is not loaded (run: kotae kb load PATH --name {kb})")
        cached = self._searchers.get(kb)
        if cached and cached[0] == digest:
            return cached[1]
        try:
            backend, built_from = open_embedded(store)
        except IndexMissing as exc:
            raise KnowledgeBaseMissing(str(exc)) from None
        meta = backend.meta(kb)
        if meta is None:
            backend.close()
            raise KnowledgeBaseMissing(f"the index of {kb!r} has no metadata; reload it (kotae kb load)")
        try:
            searcher = self._searcher(backend, meta)
        except IndexModelMismatch:
            backend.close()
            raise
        if cached:
            # Searches on other threads may still be using the old shard: close it a little later.
            self._retired.append((time.monotonic(), cached[1].backend))
        self._close_retired()
        self._searchers[kb] = (built_from, searcher)
        return searcher

    def _close_retired(self, grace_s: float = 30.0, *, force: bool = False) -> None:
        keep = []
        for retired_at, backend in self._retired:
            if force or time.monotonic() - retired_at > grace_s:
                try:
                    backend.close()
                except Exception:
                    pass
            else:
                keep.append((retired_at, backend))
        self._retired = keep

    def _searcher(self, backend: Backend, meta: IndexMeta) -> HybridSearcher:
        try:
            return HybridSearcher(
                backend, meta, self.embedder, weights=self.weights, rescore_pool=self.settings.rescore_pool
            )
        except EmbeddingMismatch as exc:
            raise IndexModelMismatch(str(exc)) from None

    def searcher(self, kb: str) -> HybridSearcher:
        with self._lock:
            return self._open(kb)

    def _search(self, searcher: HybridSearcher, text: str, day: date) -> tuple[list[Hit], list[Hit]]:
        kinds = ("doc", "faq") if self.settings.top_faq else ("doc",)
        hits = searcher.search_many(text, kinds=kinds, day=day, top_k=self.settings.top_k * 3)
        return best_per_document(hits["doc"]), hits.get("faq", [])

    def hits(self, text: str, *, kb: str, day: date) -> tuple[str, list[Hit], list[Hit], IndexMeta]:
        """The comment as searched (in the records' words), its document and FAQ hits, and the index's meta."""
        searcher = self.searcher(kb)
        vocab = searcher.meta.vocab()
        searched = vocab.rewrite(text) if vocab else text
        docs, faq = self._search(searcher, searched, day)
        return searched, docs, faq, searcher.meta

    def retrieve(self, text: str, *, kb: str, day: date) -> Retrieval:
        """Search the comment (in the knowledge base's words where it can be put so) and gate on the result."""
        searcher = self.searcher(kb)
        vocab = searcher.meta.vocab()
        searched = vocab.rewrite(text) if vocab else text
        docs, faq = self._search(searcher, searched, day)
        decision = decide(searched, docs, faq, searcher.meta, self.thresholds, self.gate_model)
        # A rewrite must keep what the comment names that no record has (消費税), or it asks another question.
        rewrite = self.rewriter.rewrite(text, keep=decision.missing) if self.rewriter else None
        rewritten = rewrite.query if rewrite else None
        if rewritten:
            # Both the comment and its rewrite are searched; each chunk keeps its better score,
            # and the gate takes the better of the two decisions' scores.
            docs2, faq2 = self._search(searcher, rewritten, day)
            docs, faq = _merge(docs, docs2), _merge(faq, faq2)
            second = decide(rewritten, docs, faq, searcher.meta, self.thresholds, self.gate_model)
            if second.top_score > decision.top_score:
                decision = second
        docs = docs[: self.settings.top_k]
        faq = faq[: self.settings.top_faq]
        slips = vocab.slips(text) if vocab and searched != text else []
        reason = decision.reason + "".join(f"; read 「{typed}」 as 「{word}」" for typed, word in slips)
        return Retrieval(
            gate=decision.gate,
            top_score=decision.top_score,
            docs=[evidence(h) for h in docs],
            faq=[faq_evidence(h) for h in faq],
            method=f"{METHOD}+rewrite" if rewritten else METHOD,
            kb=kb,
            query=rewritten,
            prompt_version=self.rewriter.prompt_version if rewritten and self.rewriter else None,
            reason=reason,
            candidates=decision.candidates,
            missing=decision.missing,
            searched=searched if searched != text else None,
            calls=rewrite.calls if rewrite else [],
        )

    def close(self) -> None:
        """Close every index this retriever opened (and delete its private copies)."""
        for _, searcher in self._searchers.values():
            try:
                searcher.backend.close()
            except Exception:
                pass
        self._searchers.clear()
        self._close_retired(force=True)


def ask_back(candidates: list[str], lang: str) -> str:
    """The clarify reply: which of these topics did the viewer mean?"""
    if lang == "ja":
        if len(candidates) == 1:
            return f"「{candidates[0]}」についてのご質問でしょうか？"
        quoted = "、".join(f"「{c}」" for c in candidates)
        return f"{quoted}のどれについてのご質問でしょうか？"
    if len(candidates) == 1:
        return f'Do you mean "{candidates[0]}"?'
    return "Do you mean " + ", ".join(f'"{c}"' for c in candidates[:-1]) + f' or "{candidates[-1]}"?'
