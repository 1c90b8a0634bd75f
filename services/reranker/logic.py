"""What the reranker does: keep the relevant candidates, most relevant first.

The top-1 document decides the slide shown on stream. Three methods:

* ``model`` (``KOTAE_RERANKER_MODEL``): a chat model receives the question and the
  candidates (documents, then FAQ) as numbered blocks and returns a JSON list of
  the relevant numbers, most relevant first; empty when none is relevant. Unknown
  numbers are dropped. A reply that is not that JSON is asked again
  (``KOTAE_MODEL_REASK`` times), then the stage falls back to retrieval order and
  marks the result ``degraded``.
* ``keep_top_n`` (offline default): retrieval order, unchanged.
* ``embedding_rescore`` (offline, ``KOTAE_RERANKER_OFFLINE``): each document is
  rescored by the embedding model — its best-matching sentence's cosine
  similarity to the question — blended with its retrieval score. Measured by
  ``bench/rerank.py``: with the default USE embeddings it does not beat
  retrieval order on JSQuAD (the hybrid retrieval is already much stronger than
  USE alone), so it is not the default; with a stronger embedding model
  (``e5-small-q4``) it gains about a point of top-1 at ~1 s of CPU per comment.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kotae.citations import Block, numbered_blocks
from kotae.contracts import Evidence, FaqEvidence, ModelCall, RetrievalV1
from kotae.knowledge.embeddings import Embedder
from kotae.language.text import split_sentences
from kotae.model_reply import again, json_object, number_list
from kotae.prompts import load_prompt
from kotae.providers import BadReply, ChatModel, ModelUnavailable

KEEP_TOP_N = "keep_top_n"
EMBEDDING_RESCORE = "embedding_rescore"
MODEL = "model"

PROMPTS = Path(__file__).parent / "prompts"
PROMPT = "rerank.v1"

#: Weight of the embedding similarity against the (max-scaled) retrieval score.
ALPHA = 0.3
#: Longest passage text shown to the model per candidate.
MAX_BLOCK_CHARS = 1200


@dataclass(frozen=True)
class Reranked:
    docs: list[Evidence]
    method: str
    faq: list[FaqEvidence] = field(default_factory=list)
    degraded: bool = False
    reason: str | None = None
    prompt_version: str | None = None
    calls: list[ModelCall] = field(default_factory=list)

    @property
    def slide(self) -> int | str | None:
        if self.docs:
            return self.docs[0].slide
        return self.faq[0].slide if self.faq else None

    @property
    def empty(self) -> bool:
        return not self.docs and not self.faq


def keep_top_n(retrieval: RetrievalV1, n: int) -> Reranked:
    """The first ``n`` documents in retrieval order."""
    return Reranked(docs=list(retrieval.docs[:n]), faq=list(retrieval.faq), method=KEEP_TOP_N)


def rescore_scores(question: str, docs: list[Evidence], embedder: Embedder, alpha: float = ALPHA) -> list[float]:
    """Blend of each document's max-scaled retrieval score and its best sentence's cosine to the question."""
    if not docs:
        return []
    sentences: list[str] = []
    owner: list[int] = []
    for i, doc in enumerate(docs):
        parts = split_sentences(doc.text) or [doc.text]
        for part in parts:
            sentences.append(part)
            owner.append(i)
    q = embedder.embed([question], "query")[0]
    vecs = embedder.embed(sentences, "passage")
    cos = vecs @ q
    best = np.full(len(docs), -1.0, dtype=np.float32)
    for i, c in zip(owner, cos, strict=True):
        best[i] = max(best[i], float(c))
    top = max((d.score for d in docs), default=0.0)
    scale = top if top > 0 else 1.0
    return [(1 - alpha) * (d.score / scale) + alpha * float(b) for d, b in zip(docs, best, strict=True)]


def embedding_rescore(retrieval: RetrievalV1, n: int, embedder: Embedder, alpha: float = ALPHA) -> Reranked:
    """Reorder the documents by :func:`rescore_scores`; keep the best ``n``."""
    scores = rescore_scores(retrieval.comment.normalized, list(retrieval.docs), embedder, alpha)
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    docs = [retrieval.docs[i].model_copy(update={"score": round(scores[i], 6)}) for i in order[:n]]
    return Reranked(docs=docs, faq=list(retrieval.faq), method=EMBEDDING_RESCORE)


def render_candidates(question: str, blocks: list[Block]) -> str:
    """The user message: the question, then every candidate as a numbered block."""
    parts = ["Question / 質問:", "<<<", question, ">>>", "", "Candidates / 候補:"]
    for b in blocks:
        label = "FAQ" if b.kind == "faq" else "document"
        head = f"[{b.n}] ({label}) {b.title}".rstrip()
        parts += ["", head, b.text[:MAX_BLOCK_CHARS]]
    return "\n".join(parts)


def read_ids(text: str, count: int) -> list[int]:
    """The relevant candidate numbers of a reranker reply, most relevant first; :class:`BadReply` when unusable.

    Read by :mod:`kotae.model_reply`: a fence or words around the JSON, a bare list, numbers
    written as strings. Numbers outside 1..``count`` are dropped; a list none of whose items is
    a candidate's number is unusable (not "none relevant").
    """
    value = json_object(text, list_key="ids")
    if "ids" not in value:
        raise BadReply(f"reply has no 'ids' list: {text[:120]!r}")
    return number_list(value["ids"], count, key="ids")


async def model_rerank(
    retrieval: RetrievalV1,
    model: ChatModel,
    *,
    n: int,
    reask: int,
    final_attempt: bool,
    prompt_version: str = PROMPT,
) -> Reranked:
    """Ask ``model`` which candidates are relevant.

    A :class:`ModelUnavailable` propagates (the bus redelivers the input later)
    unless this is the input's final delivery: then, as for a reply that stays
    unparseable, retrieval order is kept and the result is ``degraded``.
    """
    blocks = numbered_blocks(list(retrieval.docs), list(retrieval.faq))
    system = load_prompt(PROMPTS, prompt_version)
    user = render_candidates(retrieval.comment.text, blocks)
    calls: list[ModelCall] = []
    problem = ""
    for _ in range(1 + reask):
        try:
            asked = user if not problem else again(user, problem)
            reply = await model.acomplete(system=system, user=asked, max_tokens=100, json_mode=True)
        except ModelUnavailable as exc:
            if not final_attempt:
                raise
            problem = f"reranker model unavailable: {exc}"
            break
        except BadReply as exc:  # a response body the SDK could not read
            problem = f"reranker reply unparseable: {exc}"
            continue
        try:
            chosen = read_ids(reply.text, len(blocks))
        except BadReply as exc:
            calls.append(reply.call("reranker", prompt_version, outcome="unparseable"))
            problem = f"reranker reply unparseable: {exc}"
            continue
        calls.append(reply.call("reranker", prompt_version))
        docs = [retrieval.docs[i - 1] for i in chosen if i <= len(retrieval.docs)][:n]
        faq = [retrieval.faq[i - 1 - len(retrieval.docs)] for i in chosen if i > len(retrieval.docs)]
        return Reranked(docs=docs, faq=faq, method=MODEL, prompt_version=prompt_version, calls=calls)
    fallback = keep_top_n(retrieval, n)
    return Reranked(
        docs=fallback.docs,
        faq=fallback.faq,
        method=MODEL,
        degraded=True,
        reason=f"{problem}; kept retrieval order",
        prompt_version=prompt_version,
        calls=calls,
    )
