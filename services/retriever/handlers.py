"""The retriever's bus edge: comment.v1 in; retrieval.v1, or a clarify/unanswered answer, out."""

from __future__ import annotations

import asyncio

from faststream.nats import NatsRouter
from faststream.nats.annotations import JsClient

from kotae.bus.edge import StageEdge
from kotae.contracts import AnswerV1, CommentV1, RetrievalV1, subjects
from kotae.settings import Settings
from kotae.tracing import current_trace_id
from kotae.clarify import ClarifyStore, PendingClarify
from kotae.services.retriever.clarify import pick_candidates
from kotae.services.retriever.logic import METHOD, Retriever, ask_back


def build_router(settings: Settings, retriever: Retriever | None = None) -> NatsRouter:
    edge = StageEdge("retriever", settings)
    router = edge.router()
    edge.output(subjects.RETRIEVAL, RetrievalV1, "Evidence for a comment that passed the gate.")
    edge.output(subjects.answer("clarify"), AnswerV1, "Ask-back naming the candidate topics.")
    edge.output(subjects.answer("unanswered"), AnswerV1, "No evidence good enough (no_match).")
    edge.fail_on_exhausted(CommentV1)
    state: dict[str, object] = {}
    lock = asyncio.Lock()

    def get_retriever() -> Retriever:
        # Built on first use, so building the router (docs, tests) loads no model.
        if "retriever" not in state:
            state["retriever"] = retriever or Retriever(settings)
        return state["retriever"]  # type: ignore[return-value]

    async def clarifications(js: JsClient) -> ClarifyStore:
        async with lock:
            if "clarify" not in state:
                state["clarify"] = await ClarifyStore.open(js, settings.clarify_ttl_s, settings.stream_replicas)
        return state["clarify"]  # type: ignore[return-value]

    @router.subscriber(**edge.subscription(description="Find evidence for a comment; gate on the best score."))
    async def on_comment(comment: CommentV1, js: JsClient) -> None:
        # The stream's binding in this stage's own settings decides the knowledge base, so a
        # comment can never draw evidence from another channel's or campaign's documents.
        kb = settings.kb_for(comment.stream_id)
        store = await clarifications(js)
        common = {"comment_id": comment.comment_id, "stream_id": comment.stream_id}
        pending = await store.get(comment.stream_id, comment.author) if comment.author else None
        # An ask-back stored by this very comment is not a reply to it: a redelivery after a
        # crash must ask back again (deduplicated), not answer itself.
        if pending is not None and pending.kb == kb and pending.comment_id != comment.comment_id:
            chosen = pick_candidates(comment.normalized, pending)
            if chosen:
                joined = comment.model_copy(update={"normalized": f"{pending.question} {comment.normalized}"})
                await edge.publish(
                    subjects.RETRIEVAL,
                    RetrievalV1(
                        **common, comment=joined, gate="answer", top_score=chosen[0].score, docs=chosen,
                        faq=pending.faq, method=f"{METHOD}+clarified", kb=kb, clarified_from=pending.comment_id,
                    ),
                )
                await store.delete(comment.stream_id, comment.author)
                return
        result = await asyncio.to_thread(
            get_retriever().retrieve, comment.normalized, kb=kb, day=comment.published_at.date()
        )
        if result.gate == "answer":
            await edge.publish(
                subjects.RETRIEVAL,
                RetrievalV1(
                    **common, comment=comment, gate=result.gate, top_score=result.top_score,
                    docs=result.docs, faq=result.faq, method=result.method, kb=kb,
                    query=result.query, prompt_version=result.prompt_version,
                ),
            )
        elif result.gate == "clarify":
            candidates = result.candidates()
            text = ask_back(candidates, comment.lang)
            if comment.author:
                await store.put(
                    comment.stream_id,
                    comment.author,
                    PendingClarify(
                        comment_id=comment.comment_id, question=comment.normalized, kb=kb,
                        docs=[d for d in result.docs if d.title in candidates], faq=result.faq,
                    ),
                )
            await edge.publish(
                subjects.answer("clarify"),
                AnswerV1(
                    **common, comment=comment, outcome="clarify", answer=text, speech=text, candidates=candidates,
                    docs=result.docs,
                    reason=f"clarify: best score {result.top_score:.2f} between {settings.gate_clarify:.2f} and {settings.gate_answer:.2f}",
                    methods={"retriever": result.method}, trace_id=current_trace_id(),
                ),
            )
        else:
            await edge.publish(
                subjects.answer("unanswered"),
                AnswerV1(
                    **common, comment=comment, outcome="unanswered",
                    reason=f"no_match: best score {result.top_score:.2f} below {settings.gate_clarify:.2f}",
                    methods={"retriever": result.method}, trace_id=current_trace_id(),
                ),
            )

    return router
