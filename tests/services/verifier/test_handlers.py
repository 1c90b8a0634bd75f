"""The verifier's bus edge on an in-memory broker (TestNatsBroker, no server).

draft.v1 in on kotae.draft.v1; answer.v1 on kotae.answer.v1.verified or
kotae.answer.v1.rejected out; poison input to kotae.deadletter.v1.verifier.
The in-memory bus (and why inputs carry a ``$JS.ACK...`` reply subject) is
tests/services/bus_harness.py.
"""

from datetime import datetime, timezone
from pathlib import Path

import pytest

from kotae.citations import citation_check, strip_markers
from kotae.contracts import AnswerV1, Citation, CommentV1, DraftV1, Evidence, subjects
from kotae.services.verifier.handlers import build_router
from kotae.services.verifier.logic import SAFE_REPLY
from kotae.settings import Settings, load_settings

from tests.services.bus_harness import POISON, StageHarness

STAGE = "verifier"
HARNESS = StageHarness(STAGE, subjects.DRAFT, build_router, outputs=(subjects.ANSWER_ALL, subjects.DEADLETTER_ALL))


# --- messages ---------------------------------------------------------------------------


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings(data_dir=tmp_path, inflight=1)


CHILDCARE = Evidence(
    doc_id="childcare-2027",
    chunk_id="childcare-2027#a",
    title="子育て支援：保育料と待機児童ゼロ",
    text=(
        "子育て支援：保育料と待機児童ゼロ\n"
        "0〜2歳児の保育料は、世帯の所得にかかわらず月額1万5千円を上限にします。"
        "第2子以降の保育料は無料にします。"
    ),
    source="政策集2027 p.4",
    slide=4,
    lang="ja",
    score=0.9,
)
FAITHFUL = "0〜2歳児の保育料は、世帯の所得にかかわらず月額1万5千円を上限にします[1]。"
CHANGED_NUMBER = "0〜2歳児の保育料は、世帯の所得にかかわらず月額2万5千円を上限にします[1]。"


def draft(answer: str, comment_id: str = "c-1") -> DraftV1:
    question = "保育料っていくらになるの"
    comment = CommentV1(
        comment_id=comment_id,
        stream_id="stream-1",
        author="viewer",
        text=question,
        normalized=question,
        published_at=datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc),
    )
    return DraftV1(
        comment_id=comment_id,
        stream_id="stream-1",
        comment=comment,
        docs=[CHILDCARE],
        answer=answer,
        speech=strip_markers(answer),
        citations=[Citation(n=1, doc_id=CHILDCARE.doc_id, chunk_id=CHILDCARE.chunk_id, source=CHILDCARE.source, slide=4)],
        slide=4,
        citation_check=citation_check(answer, 1),
        method="extractive",
        methods={"retriever": "bm25", "reranker": "keep_top_n", "generator": "extractive"},
    )


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
    assert answer.methods == {**d.methods, "verifier": answer.methods["verifier"]}
    assert out.headers["Nats-Msg-Id"] == f"c-1:{d.comment.message_id}:{STAGE}:{subjects.ANSWER_PREFIX}"  # one id for any outcome


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
