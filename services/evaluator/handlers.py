"""The evaluator's bus edge: every answer.v1 in (its own durable consumer), evaluation.v1 out.

The evaluator reads the answers stream through its own consumer, so it takes
nothing from the overlay, the TTS or any other subscriber, and never delays
them: however slow its judge, only its own consumer falls behind.

With ``KOTAE_EVALUATOR_MODEL`` set the model judge scores each answer (a model
that stays unavailable is retried through redelivery, then its metrics are
null with the reason); otherwise the offline ``lexical`` method does. An
evaluation job that fails as a whole (retries used up) is recorded as
``failed`` so the report counts it apart.
"""

from __future__ import annotations

from faststream.nats import NatsRouter
from pydantic import BaseModel

from kotae.bus.edge import StageEdge
from kotae.contracts import AnswerV1, EvaluationV1, subjects
from kotae.logs import get_logger
from kotae.providers import ChatModel
from kotae.settings import Settings
from kotae.services.evaluator.judge import Embeds, ModelJudge
from kotae.services.evaluator.logic import METHOD, evaluate, failed_evaluation
from kotae.services.evaluator.metrics import RollingRates

log = get_logger("kotae.evaluator")


def build_judge(settings: Settings) -> ModelJudge | None:
    """The model judge ``KOTAE_EVALUATOR_MODEL`` names, or None for the offline method."""
    if not settings.evaluator_model:
        return None
    model = ChatModel.from_settings(settings, settings.evaluator_model, setting="KOTAE_EVALUATOR_MODEL")
    key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
    return ModelJudge(model, Embeds(settings.embedding_model, key), reask=settings.model_reask)


def build_router(settings: Settings, *, rates: RollingRates | None = None) -> NatsRouter:
    edge = StageEdge("evaluator", settings)
    router = edge.router()
    edge.output(subjects.EVALUATION, EvaluationV1, "Scores and judgements of one answer (the audit log).")
    judge = build_judge(settings)

    async def publish(evaluation: EvaluationV1) -> None:
        await edge.publish(subjects.EVALUATION, evaluation)
        if rates is not None:
            rates.add(evaluation)
        log.info(
            "answer.evaluated",
            comment_id=evaluation.comment_id,
            status=evaluation.status,
            faithfulness=evaluation.faithfulness.value,
            method=evaluation.method,
        )

    async def give_up(message: BaseModel, reason: str) -> None:
        answer = AnswerV1.model_validate(message.model_dump())
        if judge is None:
            await publish(failed_evaluation(answer, reason, method=METHOD))
        else:
            await publish(failed_evaluation(answer, reason, method="model", model=judge.model.name, mode="model"))

    edge.on_exhausted(AnswerV1, give_up)

    @router.subscriber(**edge.subscription(description="Score each answer (faithfulness, relevancy, context precision, judgements)."))
    async def on_answer(answer: AnswerV1) -> None:
        if judge is None:
            evaluation = evaluate(answer)
        else:
            evaluation = await judge.evaluate(answer, final=edge.final_attempt())
        await publish(evaluation)

    return router
