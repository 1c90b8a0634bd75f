"""The retriever's bus edge: comment.v1 in; retrieval.v1, or a clarify/unanswered answer, out."""

from __future__ import annotations

from faststream.nats import NatsRouter

from kotae.bus.edge import StageEdge
from kotae.contracts import AnswerV1, CommentV1, RetrievalV1, subjects
from kotae.settings import Settings
from kotae.tracing import current_trace_id
from kotae.services.retriever.logic import Retriever, ask_back


def build_router(settings: Settings, retriever: Retriever | None = None) -> NatsRouter:
    edge = StageEdge("retriever", settings)
    router = edge.router()
    edge.output(subjects.RETRIEVAL, RetrievalV1, "Evidence for a comment that passed the gate.")
    edge.output(subjects.answer("clarify"), AnswerV1, "Ask-back naming the candidate topics.")
    edge.output(subjects.answer("unanswered"), AnswerV1, "No evidence good enough (no_match).")
    retriever = retriever or Retriever(settings)

    @router.subscriber(**edge.subscription(description="Find evidence for a comment; gate on the best score."))
    async def on_comment(comment: CommentV1) -> None:
        result = retriever.retrieve(comment.normalized, kb=comment.kb, day=comment.published_at.date())
        common = {"comment_id": comment.comment_id, "stream_id": comment.stream_id, "comment": comment}
        if result.gate == "answer":
            await edge.publish(
                subjects.RETRIEVAL,
                RetrievalV1(**common, gate=result.gate, top_score=result.top_score, docs=result.docs, faq=result.faq, method=result.method),
            )
        elif result.gate == "clarify":
            candidates = result.candidates()
            text = ask_back(candidates, comment.lang)
            await edge.publish(
                subjects.answer("clarify"),
                AnswerV1(
                    **common,
                    outcome="clarify",
                    answer=text,
                    speech=text,
                    candidates=candidates,
                    docs=result.docs,
                    reason=f"clarify: best score {result.top_score:.2f} between {settings.gate_clarify:.2f} and {settings.gate_answer:.2f}",
                    methods={"retriever": result.method},
                    trace_id=current_trace_id(),
                ),
            )
        else:
            await edge.publish(
                subjects.answer("unanswered"),
                AnswerV1(
                    **common,
                    outcome="unanswered",
                    reason=f"no_match: best score {result.top_score:.2f} below {settings.gate_clarify:.2f}",
                    methods={"retriever": result.method},
                    trace_id=current_trace_id(),
                ),
            )

    return router
