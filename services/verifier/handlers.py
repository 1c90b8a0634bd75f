"""The verifier's bus edge: draft.v1 in; answer.v1.verified or answer.v1.rejected out."""

from __future__ import annotations

from faststream.nats import NatsRouter

from kotae.bus.edge import StageEdge
from kotae.contracts import AnswerV1, DraftV1, subjects
from kotae.settings import Settings
from kotae.tracing import current_trace_id
from kotae.services.verifier.logic import SAFE_REPLY, verify


def build_router(settings: Settings) -> NatsRouter:
    edge = StageEdge("verifier", settings)
    router = edge.router()
    edge.output(subjects.answer("verified"), AnswerV1, "A draft that passed every check.")
    edge.output(subjects.answer("rejected"), AnswerV1, "A draft that failed a check: the safe reply, with the reasons.")

    @router.subscriber(**edge.subscription(description="Check a draft for hallucination; fail closed."))
    async def on_draft(draft: DraftV1) -> None:
        verdict = verify(draft.answer, draft.docs, draft.faq)
        common = {
            "comment_id": draft.comment_id,
            "stream_id": draft.stream_id,
            "comment": draft.comment,
            "citations": draft.citations,
            "slide": draft.slide,
            "docs": draft.docs,
            "methods": {**draft.methods, "verifier": verdict.method},
            "degraded": draft.degraded,
            "verdict": verdict.verdict,
            "trace_id": current_trace_id(),
        }
        if verdict.passed:
            answer = AnswerV1(**common, outcome="verified", answer=draft.answer, speech=draft.speech, reason="verified")
        else:
            safe = SAFE_REPLY[draft.comment.lang]
            answer = AnswerV1(
                **common,
                outcome="rejected",
                answer=safe,
                speech=safe,
                draft=draft.answer,
                reason=f"hallucination class {verdict.verdict}: {verdict.reasons[0]}",
                reasons=verdict.reasons,
            )
        await edge.publish(subjects.answer(answer.outcome), answer)

    return router
