"""The reranker's bus edge: retrieval.v1 in; rerank.v1 (or an unanswered answer) out."""

from __future__ import annotations

import asyncio

from kotae.bus.edge import final_attempt
from kotae.contracts import AnswerV1, RerankV1, RetrievalV1
from kotae.providers import ChatModel
from kotae.services.reranker.logic import EMBEDDING_RESCORE, Reranked, embedding_rescore, keep_top_n, model_rerank
from kotae.settings import Settings
from kotae.stage import Bus, Handler

STAGE = "reranker"


def build_handler(settings: Settings, bus: Bus) -> Handler[RetrievalV1]:
    model = ChatModel.configured(settings, "reranker_model", bus)
    embedder = None
    if model is None and settings.reranker_offline == EMBEDDING_RESCORE:
        from kotae.knowledge.embeddings import embedder_for

        key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
        embedder = embedder_for(settings.reranker_embedding_model or settings.embedding_model, api_key=key)

    async def rerank(retrieval: RetrievalV1) -> Reranked:
        if model is not None:
            return await model_rerank(
                retrieval, model, n=settings.top_n, reask=settings.model_reask, final_attempt=final_attempt()
            )
        if embedder is not None:
            return await asyncio.to_thread(embedding_rescore, retrieval, settings.top_n, embedder)
        return keep_top_n(retrieval, settings.top_n)

    async def on_retrieval(retrieval: RetrievalV1) -> RerankV1 | AnswerV1:
        result = await rerank(retrieval)
        carried = {
            "stage": STAGE,
            "method": result.method,
            "calls": result.calls,
            "degraded": (result.reason or "reranker fell back to retrieval order") if result.degraded else None,
        }
        if result.empty:
            return retrieval.forward(
                AnswerV1,
                **carried,
                outcome="unanswered",
                reason="rerank_empty: no candidate is relevant to the question",
            )
        return retrieval.forward(
            RerankV1,
            **carried,
            docs=result.docs,
            faq=result.faq,
            top_score=retrieval.top_score,
            slide=result.slide,
            prompt_version=result.prompt_version,
        )

    return Handler(on_retrieval)
