"""The verifier's bus edge: draft.v1 in; answer.v1.verified, .rejected or .unanswered out.

What becomes of a draft is decided by ``decision.decide`` (relevance, then support by the
offline method, the model, or the cascade of both); this module only turns the decision
into the comment's answer.

Fail closed at every level: a check that finds something rejects; a model that
cannot be parsed rejects; a draft whose retries run out (model down, a bug)
is rejected with ``verifier_unavailable`` — the only way to ``verified`` is a
check that ran and found nothing.
"""

from __future__ import annotations

from typing import Any

from kotae.contracts import AnswerV1, DraftV1
from kotae.services.verifier.decision import VerifierDecision, VerifierPolicy, decide
from kotae.services.verifier.logic import NOT_FOUND, SAFE_REPLY
from kotae.services.verifier.model import UNAVAILABLE
from kotae.settings import Settings
from kotae.stage import Bus, Handler

STAGE = "verifier"


def answer_for(draft: DraftV1, decision: VerifierDecision, *, decided_by: str | None = None) -> AnswerV1:
    """The comment's answer: the draft when verified; the fixed not-found sentence when it misses the
    question (no verdict: nothing was judged false); otherwise the safe reply with the verdict.
    The draft and the findings are kept for audit."""
    common: dict[str, Any] = {"stage": STAGE, "method": decision.method, "calls": decision.calls}
    common |= {"citations": draft.citations, "slide": draft.slide, "docs": draft.docs}
    common["decided_by"] = decided_by or decision.decided_by
    if decision.outcome == "verified":
        return draft.forward(
            AnswerV1,
            **common,
            outcome="verified",
            answer=draft.answer,
            speech=draft.speech,
            verdict=0,
            reason="verified",
        )
    unanswered = decision.outcome == "unanswered"
    text = (NOT_FOUND if unanswered else SAFE_REPLY)[draft.comment.lang]
    return draft.forward(
        AnswerV1,
        **common,
        outcome=decision.outcome,
        answer=text,
        speech=text,
        draft=draft.answer,
        verdict=None if unanswered else decision.verdict,
        reason=decision.reason,
        reasons=decision.reasons,
    )


def build_handler(settings: Settings, bus: Bus) -> Handler[DraftV1]:
    policy = VerifierPolicy.from_settings(settings)
    if policy.model is not None:
        policy.model.share_slots(settings, bus)

    async def on_draft(draft: DraftV1) -> AnswerV1:
        return answer_for(draft, await decide(draft, policy))

    async def give_up(draft: DraftV1, reason: str) -> AnswerV1:
        unavailable = VerifierDecision(
            outcome="rejected",
            verdict=None,
            reason=f"{UNAVAILABLE}: {reason}",
            reasons=[reason],
            decided_by="offline" if policy.mode == "offline" else "model",
            method=policy.method,
        )
        return answer_for(draft, unavailable, decided_by=policy.mode)

    return Handler(on_draft, give_up=give_up)
