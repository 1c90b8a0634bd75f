"""The reranker's bus edge: retrieval.v1 in; rerank.v1 (or an unanswered answer) out."""

from __future__ import annotations

import asyncio

from faststream.nats import NatsRouter

from kotae.bus.edge import StageEdge
from kotae.contracts import AnswerV1, RerankV1, RetrievalV1, subjects
from kotae.providers import ChatModel
from kotae.settings import Settings
from kotae.tracing import current_trace_id
from kotae.services.reranker.logic import (
    EMBEDDING_RESCORE,
    Reranked,
    embedding_rescore,
    keep_top_n,
    model_rerank,
)


def build_router(settings: Settings) -> NatsRouter:
    edge = StageEdge("reranker", settings)
    router = edge.router()
    edge.output(subjects.RERANK, RerankV1, "Relevant documents, most relevant first.")
    edge.output(subjects.answer("unanswered"), AnswerV1, "No candidate was relevant.")
    edge.fail_on_exhausted(RetrievalV1)

    model = ChatModel.from_settings(settings, settings.reranker_model, setting="KOTAE_RERANKER_MODEL") if settings.reranker_model else None
    embedder = None
    if model is None and settings.reranker_offline == EMBEDDING_RESCORE:
        from kotae.knowledge.embeddings import embedder_for

        key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
        embedder = embedder_for(settings.reranker_embedding_model or settings.embedding_model, api_key=key)

    async def rerank(retrieval: RetrievalV1) -> Reranked:
        if model is not None:
            return await model_rerank(
                retrieval, model, n=settings.top_n, reask=settings.model_reask, final_attempt=edge.final_attempt()
            )
        if embedder is not None:
            return await asyncio.to_thread(embedding_rescore, retrieval, settings.top_n, embedder)
        return keep_top_n(retrieval, settings.top_n)

    @router.subscriber(**edge.subscription(description="Keep and order the relevant documents."))
    async def on_retrieval(retrieval: RetrievalV1) -> None:
        result = await rerank(retrieval)
        common = {"comment_id": retrieval.comment_id, "stream_id": retrieval.stream_id, "comment": retrieval.comment}
        methods = {"retriever": retrieval.method, "reranker": result.method}
        calls = [*retrieval.model_calls, *result.calls]
        if result.empty:
            await edge.publish(
                subjects.answer("unanswered"),
                AnswerV1(
                    **common,
                    outcome="unanswered",
                    reason="rerank_empty: no candidate is relevant to the question",
                    methods=methods,
                    degraded=result.degraded,
                    degraded_reason=result.reason,
                    trace_id=current_trace_id(),
                    model_calls=calls,
                ),
            )
            return
        await edge.publish(
            subjects.RERANK,
            RerankV1(
                **common,
                docs=result.docs,
                faq=result.faq,
                top_score=retrieval.top_score,
                method=result.method,
                degraded=result.degraded,
                degraded_reason=result.reason,
                slide=result.slide,
                methods=methods,
                prompt_version=result.prompt_version,
                model_calls=calls,
            ),
        )

    return router
