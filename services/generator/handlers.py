"""The generator's bus edge: rerank.v1 in; draft.v1 (or an unanswered answer) out."""

from __future__ import annotations

from faststream.nats import NatsRouter

from kotae.bus.edge import StageEdge
from kotae.contracts import AnswerV1, DraftV1, RerankV1, subjects
from kotae.providers import ChatModel
from kotae.settings import Settings
from kotae.tracing import current_trace_id
from kotae.services.generator.logic import Draft, extractive_answer
from kotae.services.generator.model import model_answer
from kotae.services.generator.persona import load_persona


def build_router(settings: Settings) -> NatsRouter:
    edge = StageEdge("generator", settings)
    router = edge.router()
    edge.output(subjects.DRAFT, DraftV1, "A cited draft, not yet verified.")
    edge.output(subjects.answer("unanswered"), AnswerV1, "The documents do not answer: the fixed not-found sentence.")
    edge.fail_on_exhausted(RerankV1)

    persona = load_persona(settings.persona_file)
    model = ChatModel.from_settings(settings, settings.generator_model, setting="KOTAE_GENERATOR_MODEL") if settings.generator_model else None

    async def generate(rerank: RerankV1) -> Draft:
        if model is not None:
            return await model_answer(rerank.comment, rerank, model, persona, max_sentences=settings.max_answer_sentences)
        return extractive_answer(
            rerank.comment,
            rerank,
            max_sentences=settings.max_answer_sentences,
            max_chars=persona.max_spoken_chars[rerank.comment.lang],
        )

    @router.subscriber(**edge.subscription(description="Draft a cited answer from the reranked evidence."))
    async def on_rerank(rerank: RerankV1) -> None:
        draft = await generate(rerank)
        methods = {**rerank.methods, "generator": draft.method}
        calls = [*rerank.model_calls, *draft.calls]
        common = {
            "comment_id": rerank.comment_id,
            "stream_id": rerank.stream_id,
            "comment": rerank.comment,
            "methods": methods,
            "degraded": rerank.degraded,
            "degraded_reason": rerank.degraded_reason,
            "model_calls": calls,
        }
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
                prompt_version=draft.prompt_version,
            ),
        )

    return router
