"""The reranker's bus edge on an in-memory broker (TestNatsBroker, no server).

retrieval.v1 in on kotae.retrieval.v1; rerank.v1 on kotae.rerank.v1, or an
unanswered answer.v1, out; poison input to kotae.deadletter.v1.reranker.

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

from kotae.contracts import AnswerV1, CommentV1, DeadLetterV1, Evidence, FaqEvidence, RerankV1, RetrievalV1, subjects
from kotae.services.reranker.handlers import build_router
from kotae.settings import Settings, load_settings

STAGE = "reranker"
IN_SUBJECT = subjects.RETRIEVAL
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
    wire = Wire(broker, subjects.RERANK, subjects.ANSWER_ALL, subjects.DEADLETTER_ALL)
    return broker, wire


# --- messages ---------------------------------------------------------------------------


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings(data_dir=tmp_path, inflight=1)


def comment(comment_id: str = "c-1") -> CommentV1:
    return CommentV1(
        comment_id=comment_id,
        stream_id="stream-1",
        author="viewer",
        text="保育料っていくらになるの",
        normalized="保育料っていくらになるの",
        published_at=datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc),
    )


def evidence(i: int, slide: int | str | None) -> Evidence:
    # Scores deliberately not in order: the reranker keeps retrieval's order, not the scores'.
    return Evidence(doc_id=f"doc-{i}", chunk_id=f"doc-{i}#0", title=f"doc {i}", text=f"本文{i}。", slide=slide, lang="ja", score=0.1 * (i % 3))


FAQ = FaqEvidence(faq_id="faq-childcare-fee", question="保育料はいくらになりますか？", answer="月額1万5千円が上限です。", slide=9, lang="ja", score=0.7)


def retrieval(docs: list[Evidence], faq: list[FaqEvidence], comment_id: str = "c-1") -> RetrievalV1:
    return RetrievalV1(
        comment_id=comment_id,
        stream_id="stream-1",
        comment=comment(comment_id),
        gate="answer",
        top_score=0.8,
        docs=docs,
        faq=faq,
        method="bm25",
    )


# --- tests ------------------------------------------------------------------------------


async def test_keeps_top_n_in_order_with_the_top_docs_slide(settings: Settings) -> None:
    docs = [evidence(i, slide) for i, slide in enumerate([7, 3, "appendix", 1, 2, 5])]
    r = retrieval(docs, [FAQ])
    broker, wire = stage_broker(settings)
    async with TestNatsBroker(broker) as br:
        await send(br, r.model_dump_json().encode(), seq=1)

    out = wire.only()
    assert out.subject == subjects.RERANK
    rerank = RerankV1.model_validate(out.body)
    assert settings.top_n < len(docs)
    assert [d.doc_id for d in rerank.docs] == [d.doc_id for d in docs[: settings.top_n]]
    assert rerank.docs == docs[: settings.top_n]
    assert rerank.slide == 7
    assert rerank.faq == [FAQ]
    assert rerank.comment == r.comment
    assert rerank.top_score == r.top_score
    assert rerank.methods == {"retriever": "bm25", "reranker": rerank.method}
    assert out.headers["Nats-Msg-Id"] == f"c-1:{r.comment.message_id}:{STAGE}:{subjects.RERANK}"


async def test_faq_only_carries_the_faqs_slide(settings: Settings) -> None:
    broker, wire = stage_broker(settings)
    async with TestNatsBroker(broker) as br:
        await send(br, retrieval([], [FAQ]).model_dump_json().encode(), seq=1)

    out = wire.only()
    assert out.subject == subjects.RERANK
    rerank = RerankV1.model_validate(out.body)
    assert rerank.docs == []
    assert rerank.slide == 9


async def test_no_docs_and_no_faq_is_unanswered(settings: Settings) -> None:
    r = retrieval([], [], comment_id="c-empty")
    broker, wire = stage_broker(settings)
    async with TestNatsBroker(broker) as br:
        await send(br, r.model_dump_json().encode(), seq=1)

    out = wire.only()
    assert out.subject == subjects.answer("unanswered")
    answer = AnswerV1.model_validate(out.body)
    assert answer.outcome == "unanswered"
    assert answer.reason is not None and answer.reason.startswith("rerank_empty")
    assert answer.comment == r.comment
    assert answer.comment_id == "c-empty"


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
    good = retrieval([evidence(0, 4)], [], comment_id="c-after")
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
    assert after.subject == subjects.RERANK
    assert RerankV1.model_validate(after.body).comment_id == "c-after"
