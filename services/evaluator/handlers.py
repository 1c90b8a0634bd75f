"""The evaluator's bus edge: every answer.v1 in (its own durable consumer), evaluation.v1 out.

The evaluator reads the answers stream through its own consumer, so it takes
nothing from the overlay, the TTS or any other subscriber, and never delays
them: however slow its judge, only its own consumer falls behind.

With ``KOTAE_EVALUATOR_MODEL`` set the model judge scores each answer (a model
that stays unavailable is retried through redelivery, then its metrics are
null with the reason); otherwise the offline ``lexical`` method does. An
evaluation job that fails as a whole (retries used up) is recorded as
``failed`` so the report counts it apart.

With ``KOTAE_EVALUATOR_METRICS_PORT`` set, the process also serves Prometheus
``/metrics`` with the rolling rates (see ``metrics.py``).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from kotae.bus.edge import final_attempt
from kotae.contracts import AnswerV1, EvaluationV1
from kotae.logs import get_logger
from kotae.providers import ChatModel
from kotae.services.evaluator.judge import Embeds, ModelJudge
from kotae.services.evaluator.logic import METHOD, evaluate, failed_evaluation
from kotae.services.evaluator.metrics import RollingRates
from kotae.settings import Settings
from kotae.stage import Bus, Handler

log = get_logger("kotae.evaluator")


def build_judge(settings: Settings) -> ModelJudge | None:
    """The model judge ``KOTAE_EVALUATOR_MODEL`` names, or None for the offline method."""
    if not settings.evaluator_model:
        return None
    model = ChatModel.from_settings(settings, settings.evaluator_model, setting="KOTAE_EVALUATOR_MODEL")
    key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
    return ModelJudge(model, Embeds(settings.embedding_model, key), reask=settings.model_reask)


def build_handler(settings: Settings, bus: Bus, *, rates: RollingRates | None = None) -> Handler[AnswerV1]:
    judge = build_judge(settings)
    rates = rates or RollingRates(window=settings.evaluator_window)
    servers: list[Any] = []

    async def on_answer(answer: AnswerV1) -> EvaluationV1:
        if judge is None:
            return evaluate(answer)
        return await judge.evaluate(answer, final=final_attempt())

    async def give_up(answer: AnswerV1, reason: str) -> EvaluationV1:
        if judge is None:
            return failed_evaluation(answer, reason, method=METHOD)
        return failed_evaluation(answer, reason, method="model", model=judge.model.name, mode="model")

    async def stored(evaluation: BaseModel) -> None:
        assert isinstance(evaluation, EvaluationV1)
        rates.add(evaluation)
        log.info(
            "answer.evaluated",
            comment_id=evaluation.comment_id,
            status=evaluation.status,
            faithfulness=evaluation.faithfulness.value,
            method=evaluation.method,
        )

    async def start() -> None:
        if settings.evaluator_metrics_port:
            try:
                servers.append(rates.serve(settings.evaluator_metrics_port))
            except OSError as exc:
                raise SystemExit(
                    f"KOTAE_EVALUATOR_METRICS_PORT={settings.evaluator_metrics_port}: cannot listen: {exc}"
                ) from None
            log.info("metrics.serving", port=settings.evaluator_metrics_port, path="/metrics")

    async def close() -> None:
        for server in servers:
            server.shutdown()
            server.server_close()

    return Handler(on_answer, give_up=give_up, stored=stored, start=start, close=close)
