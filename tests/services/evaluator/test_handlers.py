"""The evaluator's bus edge on an in-memory broker (TestNatsBroker, no server).

answer.v1 in on kotae.answer.v1.> (every outcome); evaluation.v1 on
kotae.evaluation.v1 out; poison input to kotae.deadletter.v1.evaluator.
The in-memory bus (and why inputs carry a ``$JS.ACK...`` reply subject) is
tests/services/bus_harness.py.
"""

from datetime import UTC, datetime
from pathlib import Path

import pytest

from kotae.contracts import AnswerV1, Citation, CommentV1, EvaluationV1, Evidence, subjects
from kotae.services.evaluator import STAGE as EVALUATOR
from kotae.settings import Settings, load_settings
from tests.services.bus_harness import POISON, StageHarness

STAGE = "evaluator"
# The evaluator's consumer filters kotae.answer.v1.>; messages arrive on one outcome's subject.
HARNESS = StageHarness(EVALUATOR, in_subject=subjects.answer("verified"))


# --- messages ---------------------------------------------------------------------------


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings(data_dir=tmp_path, inflight=1)


CHILDCARE = Evidence(
    doc_id="childcare-2027",
    chunk_id="childcare-2027#a",
    title="子育て支援：保育料と待機児童ゼロ",
    text="子育て支援：保育料と待機児童ゼロ\n0〜2歳児の保育料は、世帯の所得にかかわらず月額1万5千円を上限にします。",
    source="政策集2027 p.4",
    slide=4,
    lang="ja",
    score=0.9,
)
BUS = Evidence(
    doc_id="bus-fare-2027",
    chunk_id="bus-fare-2027#b",
    title="公共交通：コミュニティバス運賃と新路線",
    text="市のコミュニティバス「みなとループ」の運賃を、大人1回150円にします。",
    slide=6,
    lang="ja",
    score=0.2,
)


def comment(comment_id: str) -> CommentV1:
    question = "保育料っていくらになるの"
    return CommentV1(
        comment_id=comment_id,
        stream_id="stream-1",
        author="viewer",
        text=question,
        normalized=question,
        published_at=datetime(2026, 11, 30, 12, 0, tzinfo=UTC),
    )


def verified(comment_id: str = "c-1") -> AnswerV1:
    text = "0〜2歳児の保育料は、世帯の所得にかかわらず月額1万5千円を上限にします[1]。"
    return AnswerV1(
        comment_id=comment_id,
        stream_id="stream-1",
        comment=comment(comment_id),
        outcome="verified",
        answer=text,
        speech=text.replace("[1]", ""),
        citations=[Citation(n=1, doc_id=CHILDCARE.doc_id, chunk_id=CHILDCARE.chunk_id, slide=4)],
        slide=4,
        verdict=0,
        reason="verified",
        docs=[CHILDCARE, BUS],
        methods={
            "retriever": "bm25",
            "reranker": "keep_top_n",
            "generator": "extractive",
            "verifier": "citation_and_support",
        },
    )


def unanswered(comment_id: str) -> AnswerV1:
    return AnswerV1(
        comment_id=comment_id,
        stream_id="stream-1",
        comment=comment(comment_id),
        outcome="unanswered",
        reason="no_match: best score 0.00 below 0.30",
        methods={"retriever": "bm25"},
    )


# --- tests ------------------------------------------------------------------------------


async def test_verified_answer_is_evaluated(settings: Settings) -> None:
    a = verified()
    out = await HARNESS.only_output(settings, a)
    assert out.subject == subjects.EVALUATION
    evaluation = EvaluationV1.model_validate(out.body)
    assert evaluation.answer_message_id == a.message_id
    assert (evaluation.comment_id, evaluation.stream_id) == ("c-1", "stream-1")
    assert evaluation.outcome == "verified"
    assert evaluation.question == a.comment.text
    assert evaluation.answer == a.answer
    assert evaluation.evidence_ids == ["childcare-2027", "bus-fare-2027"]
    assert evaluation.status == "ok"
    assert evaluation.faithfulness.value == 1.0
    assert evaluation.context_precision is not None and evaluation.context_precision.value == 1.0
    assert evaluation.methods == a.methods
    # An evaluation carries no comment: its origin is the answer it scores (stable on redelivery).
    assert out.headers["Nats-Msg-Id"] == f"c-1:{a.message_id}:{STAGE}:{subjects.EVALUATION}"


async def test_every_outcome_subject_is_evaluated(settings: Settings) -> None:
    a = unanswered("c-un")
    out = await HARNESS.only_output(settings, a, subject=subjects.answer("unanswered"))
    assert out.subject == subjects.EVALUATION
    evaluation = EvaluationV1.model_validate(out.body)
    assert evaluation.answer_message_id == a.message_id
    assert evaluation.outcome == "unanswered"
    assert evaluation.answer is None
    assert evaluation.faithfulness.value is None and evaluation.faithfulness.reason
    assert evaluation.context_precision is None


@pytest.mark.parametrize(("payload", "content_type", "comment_id"), POISON)
async def test_poison_is_dead_lettered_and_the_next_message_handled(
    settings: Settings, payload: bytes, content_type: str | None, comment_id: str | None
) -> None:
    good = verified(comment_id="c-after")
    letter_seen, after = await HARNESS.poison_then(settings, payload, content_type, good)

    HARNESS.assert_poison_letter(letter_seen, payload, comment_id)
    assert after.subject == subjects.EVALUATION
    assert EvaluationV1.model_validate(after.body).comment_id == "c-after"


# --- the model judge on the bus -------------------------------------------------------------

from faststream.nats import TestNatsBroker  # noqa: E402

from tests.fakes.model_server import FakeModelServer  # noqa: E402


async def test_a_judge_that_stays_down_gives_a_failed_evaluation_on_the_last_delivery(settings: Settings) -> None:
    with FakeModelServer(default="500") as fake:
        judged = settings.model_copy(
            update={"evaluator_model": f"compatible:{fake.url}/v1|judge", "model_timeout_s": 5.0}
        )
        broker, wire = HARNESS.stage_broker(judged)
        a = verified("c-down")
        async with TestNatsBroker(broker) as br:
            last = HARNESS.js_reply(3, delivered=judged.max_deliver)
            await br.publish(
                a.model_dump_json().encode(),
                HARNESS.in_subject,
                stream=HARNESS.in_stream,
                headers={"content-type": "application/json"},
                reply_to=last,
            )
    out = wire.only()
    assert out.subject == subjects.EVALUATION
    evaluation = EvaluationV1.model_validate(out.body)
    assert evaluation.status == "failed" and "judge unavailable" in (evaluation.error or "")
    assert evaluation.model == "compatible:judge" and evaluation.mode == "model"
    assert evaluation.faithfulness.value is None and evaluation.answer_relevancy.value is None


async def test_a_judge_down_before_the_last_delivery_publishes_nothing_yet(settings: Settings) -> None:
    with FakeModelServer(default="500") as fake:
        judged = settings.model_copy(
            update={"evaluator_model": f"compatible:{fake.url}/v1|judge", "model_timeout_s": 5.0}
        )
        broker, wire = HARNESS.stage_broker(judged)
        async with TestNatsBroker(broker) as br:
            await HARNESS.send(br, verified("c-later").model_dump_json().encode(), seq=4)
    assert [s.subject for s in wire.seen] == []  # left for a redelivery with backoff
