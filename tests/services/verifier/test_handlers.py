"""The verifier's bus edge on an in-memory broker (TestNatsBroker, no server).

draft.v1 in on kotae.draft.v1; answer.v1 on kotae.answer.v1.verified or
kotae.answer.v1.rejected out; poison input to kotae.deadletter.v1.verifier.

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

from kotae.citations import citation_check, strip_markers
from kotae.contracts import AnswerV1, Citation, CommentV1, DeadLetterV1, DraftV1, Evidence, subjects
from kotae.services.verifier.handlers import build_router
from kotae.services.verifier.logic import SAFE_REPLY
from kotae.settings import Settings, load_settings

STAGE = "verifier"
IN_SUBJECT = subjects.DRAFT
IN_STREAM = subjects.stream_of(IN_SUBJECT)


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


async def send(br: NatsBroker, payload: bytes, *, seq: int, content_type: str | None = "application/json") -> None:
    headers = {"content-type": content_type} if content_type is not None else None
    await br.publish(payload, IN_SUBJECT, stream=IN_STREAM, headers=headers, reply_to=js_reply(seq))


def stage_broker(settings: Settings) -> tuple[NatsBroker, Wire]:
    broker = NatsBroker()
    broker.include_router(build_router(settings))
    wire = Wire(broker, subjects.ANSWER_ALL, subjects.DEADLETTER_ALL)
    return broker, wire


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
    broker, wire = stage_broker(settings)
    async with TestNatsBroker(broker) as br:
        await send(br, d.model_dump_json().encode(), seq=1)

    out = wire.only()
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
    assert out.headers["Nats-Msg-Id"] == f"c-1:{d.comment.message_id}:{STAGE}:{subjects.answer('verified')}"


async def test_draft_with_a_changed_number_is_rejected_with_the_safe_reply(settings: Settings) -> None:
    d = draft(CHANGED_NUMBER, comment_id="c-bad-number")
    broker, wire = stage_broker(settings)
    async with TestNatsBroker(broker) as br:
        await send(br, d.model_dump_json().encode(), seq=1)

    out = wire.only()
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
    good = draft(FAITHFUL, comment_id="c-after")
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
    assert after.subject == subjects.answer("verified")
    assert AnswerV1.model_validate(after.body).comment_id == "c-after"
