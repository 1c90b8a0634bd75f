"""The reranker's bus edge: retrieval.v1 in; rerank.v1 (or an unanswered answer) out."""

from __future__ import annotations

from faststream.nats import NatsRouter

from kotae.bus.edge import StageEdge
from kotae.contracts import AnswerV1, RerankV1, RetrievalV1, subjects
from kotae.settings import Settings
from kotae.tracing import current_trace_id
from kotae.services.reranker.logic import keep_top_n


def build_router(settings: Settings) -> NatsRouter:
    edge = StageEdge("reranker", settings)
    router = edge.router()
    edge.output(subjects.RERANK, RerankV1, "Relevant documents, most relevant first.")
    edge.output(subjects.answer("unanswered"), AnswerV1, "No candidate was relevant.")

    @router.subscriber(**edge.subscription(description="Keep and order the relevant documents."))
    async def on_retrieval(retrieval: RetrievalV1) -> None:
        result = keep_top_n(retrieval, settings.top_n)
        common = {"comment_id": retrieval.comment_id, "stream_id": retrieval.stream_id, "comment": retrieval.comment}
        if not result.docs and not retrieval.faq:
            await edge.publish(
                subjects.answer("unanswered"),
                AnswerV1(
                    **common,
                    outcome="unanswered",
                    reason="rerank_empty: no candidate document is relevant",
                    methods={"retriever": retrieval.method, "reranker": result.method},
                    degraded=result.degraded,
                    trace_id=current_trace_id(),
                ),
            )
            return
        slide = result.slide if result.docs else (retrieval.faq[0].slide if retrieval.faq else None)
        await edge.publish(
            subjects.RERANK,
            RerankV1(
                **common,
                docs=result.docs,
                faq=retrieval.faq,
                top_score=retrieval.top_score,
                method=result.method,
                degraded=result.degraded,
                slide=slide,
                methods={"retriever": retrieval.method, "reranker": result.method},
            ),
        )

    return router
