"""The evaluator's bus edge: every answer.v1 in (its own durable consumer), evaluation.v1 out.

The evaluator reads the answers stream through its own consumer, so it takes
nothing from the overlay, the TTS or any other subscriber, and never delays them.
"""

from __future__ import annotations

from faststream.nats import NatsRouter

from kotae.bus.edge import StageEdge
from kotae.contracts import AnswerV1, EvaluationV1, subjects
from kotae.settings import Settings
from kotae.services.evaluator.logic import evaluate


def build_router(settings: Settings) -> NatsRouter:
    edge = StageEdge("evaluator", settings)
    router = edge.router()
    edge.output(subjects.EVALUATION, EvaluationV1, "Scores of one answer (the audit log).")

    @router.subscriber(**edge.subscription(description="Score each answer (faithfulness, relevancy, context precision)."))
    async def on_answer(answer: AnswerV1) -> None:
        await edge.publish(subjects.EVALUATION, evaluate(answer))

    return router
