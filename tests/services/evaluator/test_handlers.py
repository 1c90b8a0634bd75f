"""The evaluator's bus edge on an in-memory broker (TestNatsBroker, no server).

answer.v1 in on kotae.answer.v1.> (every outcome); evaluation.v1 on
kotae.evaluation.v1 out; poison input to kotae.deadletter.v1.evaluator.

Outputs are published with ``stream=<its stream>``, and TestNatsBroker only
delivers those to subscribers of a JStream of that name, so the taps subscribe
with one. Inputs carry a ``$JS.ACK...`` reply subject, as a pull consumer's
messages do, so the edge reads ``num_delivered`` and the stream sequence from
``msg.raw_message.metadata`` as on a server (a TestNatsBroker message has no
reply subject, and ``metadata`` raises ``NotJSMessageError`` on it).
"""

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from faststream.nats import JStream, NatsBroker, TestNatsBroker
from faststream.nats.annotations import NatsMessage

from kotae.contracts import AnswerV1, Citation, CommentV1, DeadLetterV1, EvaluationV1, Evidence, subjects
from kotae.services.evaluator.handlers import build_router
from kotae.settings import Settings, load_settings

STAGE = "evaluator"
IN_STREAM = subjects.STREAM_ANSWERS
# The evaluator's consumer filters kotae.answer.v1.>; messages arrive on one outcome's subject.
IN_SUBJECT = subjects.answer("verified")


# --- in-memory bus helpers (the same in every stage's test) -----------------------


@dataclass(frozen=True)
class Seen:
    subject: str
    headers: dict[str, Any]
    body: Any


class Wire:
    """Everything the stage publishes on ``patterns``, in order."""

    def __init__(self, broker: NatsBroker, *patterns: str) -> None:
        self.seen: list[Seen] = []
        self.taps = [self._tap(broker, p) for p in patterns]

    def _tap(self, broker: NatsBroker, pattern: str) -> Any:
        @broker.subscriber(pattern, stream=JStream(subjects.stream_of(pattern), declare=False))
        async def tap(body: Any, msg: NatsMessage) -> None:
            self.seen.append(Seen(msg.raw_message.subject, dict(msg.headers), body))

        return tap

    def only(self) -> Seen:
        assert len(self.seen) == 1, [s.subject for s in self.seen]
        return self.seen[0]

    def clear(self) -> None:
        self.seen.clear()


def js_reply(seq: int, delivered: int = 1) -> str:
    """The ack subject a JetStream pull consumer's message carries (metadata source)."""
    return f"$JS.ACK.{IN_STREAM}.{STAGE}.{delivered}.{seq}.{seq}.1764504000000000000.0"


async def send(
    br: NatsBroker,
    payload: bytes,
    *,
    seq: int,
    subject: str = IN_SUBJECT,
    content_type: str | None = "application/json",
) -> None:
    headers = {"content-type": content_type} if content_type is not None else None
    await br.publish(payload, subject, stream=IN_STREAM, headers=headers, reply_to=js_reply(seq))


def stage_broker(settings: Settings) -> tuple[NatsBroker, Wire]:
    broker = NatsBroker()
    broker.include_router(build_router(settings))
    wire = Wire(broker, subjects.EVALUATION, subjects.DEADLETTER_ALL)
    return broker, wire


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
        published_at=datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc),
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
        methods={"retriever": "bm25", "reranker": "keep_top_n", "generator": "extractive", "verifier": "citation_and_support"},
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
    broker, wire = stage_broker(settings)
    async with TestNatsBroker(broker) as br:
        await send(br, a.model_dump_json().encode(), seq=1)

    out = wire.only()
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
    broker, wire = stage_broker(settings)
    async with TestNatsBroker(broker) as br:
        await send(br, a.model_dump_json().encode(), seq=1, subject=subjects.answer("unanswered"))

    out = wire.only()
    assert out.subject == subjects.EVALUATION
    evaluation = EvaluationV1.model_validate(out.body)
    assert evaluation.answer_message_id == a.message_id
    assert evaluation.outcome == "unanswered"
    assert evaluation.answer is None
    assert evaluation.faithfulness.value is None and evaluation.faithfulness.reason
    assert evaluation.context_precision is None


POISON = [
    pytest.param(b"not json", None, None, id="not-json"),
    pytest.param(b"not json", "application/json", None, id="not-json-typed-json"),
    pytest.param(
        json.dumps({"comment_id": "c-bad", "stream_id": "stream-1"}).encode(), "application/json", "c-bad", id="missing-fields"
    ),
]


@pytest.mark.parametrize(("payload", "content_type", "comment_id"), POISON)
async def test_poison_is_dead_lettered_and_the_next_message_handled(
    settings: Settings, payload: bytes, content_type: str | None, comment_id: str | None
) -> None:
    broker, wire = stage_broker(settings)
    good = verified(comment_id="c-after")
    async with TestNatsBroker(broker) as br:
        await send(br, payload, seq=7, content_type=content_type)
        letter_seen = wire.only()
        wire.clear()
        await send(br, good.model_dump_json().encode(), seq=8)

    assert letter_seen.subject == subjects.deadletter(STAGE)
    letter = DeadLetterV1.model_validate(letter_seen.body)
    assert letter.error_type == "poison"
    assert letter.stage == STAGE
    assert letter.subject == IN_SUBJECT
    assert letter.payload == payload.decode()
    assert letter.payload_encoding == "utf-8"
    assert letter.deliveries == 1
    assert letter.comment_id == comment_id
    assert letter_seen.headers["Nats-Msg-Id"] == f"{STAGE}:deadletter:{IN_STREAM}:7"

    after = wire.only()
    assert after.subject == subjects.EVALUATION
    assert EvaluationV1.model_validate(after.body).comment_id == "c-after"
