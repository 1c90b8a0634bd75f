"""The generator's bus edge: rerank.v1 in; draft.v1 (or an unanswered answer) out."""

from __future__ import annotations

from faststream.nats import NatsRouter

from kotae.bus.edge import StageEdge
from kotae.contracts import AnswerV1, DraftV1, RerankV1, subjects
from kotae.settings import Settings
from kotae.tracing import current_trace_id
from kotae.services.generator.logic import extractive_answer


def build_router(settings: Settings) -> NatsRouter:
    edge = StageEdge("generator", settings)
    router = edge.router()
    edge.output(subjects.DRAFT, DraftV1, "A cited draft, not yet verified.")
    edge.output(subjects.answer("unanswered"), AnswerV1, "The documents do not answer: the fixed not-found sentence.")

    @router.subscriber(**edge.subscription(description="Draft a cited answer from the reranked evidence."))
    async def on_rerank(rerank: RerankV1) -> None:
        draft = extractive_answer(rerank.comment, rerank, max_sentences=settings.max_answer_sentences)
        methods = {**rerank.methods, "generator": draft.method}
        common = {"comment_id": rerank.comment_id, "stream_id": rerank.stream_id, "comment": rerank.comment}
        if draft.not_found:
            # Nothing is claimed, so there is nothing to verify: the fixed sentence is the answer.
            await edge.publish(
                subjects.answer("unanswered"),
                AnswerV1(
                    **common,
                    outcome="unanswered",
                    answer=draft.answer,
                    speech=draft.speech,
                    reason="not_found: the documents do not answer the question",
                    docs=rerank.docs,
                    methods=methods,
                    degraded=rerank.degraded,
                    trace_id=current_trace_id(),
                ),
            )
            return
        await edge.publish(
            subjects.DRAFT,
            DraftV1(
                **common,
                docs=rerank.docs,
                faq=rerank.faq,
                answer=draft.answer,
                speech=draft.speech,
                citations=draft.citations,
                slide=rerank.slide,
                not_found=False,
                citation_check=draft.check,
                method=draft.method,
                methods=methods,
                degraded=rerank.degraded,
            ),
        )

    return router
