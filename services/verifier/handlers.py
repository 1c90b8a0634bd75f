"""The verifier's bus edge: draft.v1 in; answer.v1.verified or answer.v1.rejected out.

Fail closed at every level: a check that finds something rejects; a model that
cannot be parsed rejects; a draft whose retries run out (model down, a bug)
is rejected with ``verifier_unavailable`` — the only way to ``verified`` is a
check that ran and found nothing.
"""

from __future__ import annotations

from typing import Any

from faststream.nats import NatsRouter
from pydantic import BaseModel

from kotae.bus.edge import StageEdge
from kotae.contracts import AnswerV1, DraftV1, ModelCall, subjects
from kotae.providers import ChatModel
from kotae.settings import Settings
from kotae.tracing import current_trace_id
from kotae.services.verifier.logic import SAFE_REPLY, verify
from kotae.services.verifier.model import UNAVAILABLE, model_verify


def _common(draft: DraftV1, method: str, calls: list[ModelCall]) -> dict[str, Any]:
    return {
        "comment_id": draft.comment_id,
        "stream_id": draft.stream_id,
        "comment": draft.comment,
        "citations": draft.citations,
        "slide": draft.slide,
        "docs": draft.docs,
        "methods": {**draft.methods, "verifier": method},
        "degraded": draft.degraded,
        "degraded_reason": draft.degraded_reason,
        "model_calls": [*draft.model_calls, *calls],
        "trace_id": current_trace_id(),
    }


def rejected(draft: DraftV1, common: dict[str, Any], verdict: int | None, reason: str, reasons: list[str]) -> AnswerV1:
    """The safe reply in the comment's language, with the draft and the findings kept for audit."""
    safe = SAFE_REPLY[draft.comment.lang]
    return AnswerV1(**common, outcome="rejected", answer=safe, speech=safe, draft=draft.answer, verdict=verdict, reason=reason, reasons=reasons)


def build_router(settings: Settings) -> NatsRouter:
    edge = StageEdge("verifier", settings)
    router = edge.router()
    edge.output(subjects.answer("verified"), AnswerV1, "A draft that passed every check.")
    edge.output(subjects.answer("rejected"), AnswerV1, "A draft that failed a check: the safe reply, with the reasons.")
    model = ChatModel.from_settings(settings, settings.verifier_model, setting="KOTAE_VERIFIER_MODEL") if settings.verifier_model else None
    method = "model" if model is not None else None

    async def give_up(message: BaseModel, reason: str) -> None:
        draft = DraftV1.model_validate(message.model_dump())
        common = _common(draft, method or "offline", [])
        await edge.publish(subjects.answer("rejected"), rejected(draft, common, None, f"{UNAVAILABLE}: {reason}", [reason]))

    edge.on_exhausted(DraftV1, give_up)

    @router.subscriber(**edge.subscription(description="Check a draft for hallucination; fail closed."))
    async def on_draft(draft: DraftV1) -> None:
        if model is not None:
            result = await model_verify(draft, model, reask=settings.model_reask)
            common = _common(draft, result.method, result.calls)
            if result.unavailable:
                answer = rejected(draft, common, None, result.reasons[0], result.reasons)
                await edge.publish(subjects.answer("rejected"), answer)
                return
            verdict, reasons = result.verdict, result.reasons
        else:
            offline = verify(draft.answer, draft.docs, draft.faq, question=draft.comment.text)
            common = _common(draft, offline.method, [])
            verdict, reasons = offline.verdict, offline.reasons
        if verdict == 0:
            answer = AnswerV1(**common, outcome="verified", answer=draft.answer, speech=draft.speech, verdict=0, reason="verified")
        else:
            answer = rejected(draft, common, verdict, f"hallucination class {verdict}: {reasons[0]}", reasons)
        await edge.publish(subjects.answer(answer.outcome), answer)

    return router
