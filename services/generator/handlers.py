"""The generator's bus edge: rerank.v1 in; draft.v1 (or an unanswered answer) out."""

from __future__ import annotations

from kotae.bus.edge import final_attempt
from kotae.contracts import AnswerV1, DraftV1, RerankV1
from kotae.knowledge.embeddings import LazyEmbedder
from kotae.providers import ChatModel
from kotae.services.generator.logic import Draft, extractive_answer
from kotae.services.generator.model import model_answer
from kotae.services.generator.persona import load_persona
from kotae.settings import Settings
from kotae.stage import Bus, Handler

STAGE = "generator"


def build_handler(settings: Settings, bus: Bus) -> Handler[RerankV1]:
    persona = load_persona(settings.persona_file)
    model = ChatModel.configured(settings, "generator_model", bus)
    # The retriever's embedding model, for quoting evidence in another language than the comment's.
    key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
    embedder = LazyEmbedder(settings.embedding_model, api_key=key)

    async def generate(rerank: RerankV1) -> Draft:
        if model is not None:
            return await model_answer(
                rerank.comment,
                rerank,
                model,
                persona,
                max_sentences=settings.max_answer_sentences,
                reask=settings.model_reask,
                prompt_version=settings.generator_prompt,
                final_attempt=final_attempt(),
            )
        return extractive_answer(
            rerank.comment,
            rerank,
            max_sentences=settings.max_answer_sentences,
            max_chars=persona.max_spoken_chars[rerank.comment.lang],
            embedder=embedder,
        )

    async def on_rerank(rerank: RerankV1) -> DraftV1 | AnswerV1:
        draft = await generate(rerank)
        carried = {"stage": STAGE, "method": draft.method, "calls": draft.calls, "degraded": draft.degraded}
        if draft.not_found:
            # Nothing is claimed, so there is nothing to verify: the fixed sentence is the answer.
            return rerank.forward(
                AnswerV1,
                **carried,
                outcome="unanswered",
                answer=draft.answer,
                speech=draft.speech,
                reason=draft.not_found_reason,
                docs=rerank.docs,
            )
        return rerank.forward(
            DraftV1,
            **carried,
            docs=rerank.docs,
            faq=rerank.faq,
            answer=draft.answer,
            speech=draft.speech,
            citations=draft.citations,
            slide=rerank.slide,
            citation_check=draft.check,
            prompt_version=draft.prompt_version,
        )

    return Handler(on_rerank)
