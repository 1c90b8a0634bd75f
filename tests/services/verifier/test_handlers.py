"""The verifier's bus edge on an in-memory broker (TestNatsBroker, no server).

draft.v1 in on kotae.draft.v1; answer.v1 on kotae.answer.v1.verified or
kotae.answer.v1.rejected out; poison input to kotae.deadletter.v1.verifier.
The in-memory bus (and why inputs carry a ``$JS.ACK...`` reply subject) is
tests/services/bus_harness.py.
"""

from pathlib import Path

import pytest

from kotae.contracts import AnswerV1, subjects
from kotae.services.verifier import STAGE as VERIFIER
from kotae.services.verifier.logic import NOT_FOUND, SAFE_REPLY
from kotae.settings import Settings, load_settings
from tests.factories import FAITHFUL, draft
from tests.services.bus_harness import POISON, StageHarness

STAGE = "verifier"
HARNESS = StageHarness(VERIFIER)


# --- messages ---------------------------------------------------------------------------


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings(data_dir=tmp_path, inflight=1)


CHANGED_NUMBER = "0〜2歳児の保育料は、世帯の所得にかかわらず月額2万5千円を上限にします[1]。"


# --- tests ------------------------------------------------------------------------------


async def test_faithful_draft_is_verified(settings: Settings) -> None:
    d = draft(FAITHFUL)
    out = await HARNESS.only_output(settings, d)
    assert out.subject == subjects.answer("verified")
    answer = AnswerV1.model_validate(out.body)
    assert answer.outcome == "verified"
    assert answer.verdict == 0
    assert answer.answer == FAITHFUL
    assert answer.speech == d.speech
    assert answer.citations == d.citations
    assert answer.docs == d.docs
    assert answer.slide == 4
    assert answer.draft is None
    assert answer.decided_by == "offline"
    assert answer.methods == {**d.methods, "verifier": answer.methods["verifier"]}
    assert (
        out.headers["Nats-Msg-Id"] == f"c-1:{d.comment.message_id}:{STAGE}:{subjects.ANSWER_PREFIX}"
    )  # one id for any outcome


async def test_a_grounded_draft_that_misses_the_question_ends_unanswered(settings: Settings) -> None:
    """Asked how much the fee is, a supported sentence without an amount is no answer: not_found."""
    off_point = "2028年4月までに認可保育所を12か所新設し、定員を840人増やします[1]。"
    out = await HARNESS.only_output(settings, draft(off_point))
    assert out.subject == subjects.answer("unanswered")
    answer = AnswerV1.model_validate(out.body)
    assert answer.outcome == "unanswered" and answer.verdict is None
    assert answer.reason.startswith("not_found: ") and "an amount" in answer.reason
    assert answer.answer == NOT_FOUND["ja"] and answer.draft == off_point
    assert answer.decided_by == "offline"


async def test_draft_with_a_changed_number_is_rejected_with_the_safe_reply(settings: Settings) -> None:
    d = draft(CHANGED_NUMBER, comment_id="c-bad-number")
    out = await HARNESS.only_output(settings, d)
    assert out.subject == subjects.answer("rejected")
    answer = AnswerV1.model_validate(out.body)
    assert answer.outcome == "rejected"
    assert answer.verdict == 2
    assert answer.answer == SAFE_REPLY["ja"]
    assert answer.speech == SAFE_REPLY["ja"]
    assert answer.draft == CHANGED_NUMBER
    assert answer.reason is not None and answer.reason.startswith("hallucination class 2")
    assert any("25000" in r for r in answer.reasons), answer.reasons
    assert answer.comment_id == "c-bad-number"


@pytest.mark.parametrize(("payload", "content_type", "comment_id"), POISON)
async def test_poison_is_dead_lettered_and_the_next_message_handled(
    settings: Settings, payload: bytes, content_type: str | None, comment_id: str | None
) -> None:
    good = draft(FAITHFUL, comment_id="c-after")
    letter_seen, after = await HARNESS.poison_then(settings, payload, content_type, good)

    HARNESS.assert_poison_letter(letter_seen, payload, comment_id)
    assert after.subject == subjects.answer("verified")
    assert AnswerV1.model_validate(after.body).comment_id == "c-after"
