"""The retriever's bus edge on an in-memory broker (TestNatsBroker, no server).

comment.v1 in on kotae.comment.v1; retrieval.v1 (gate answer), or an answer.v1
clarify/unanswered, out; poison input to kotae.deadletter.v1.retriever.

How the in-memory broker is made to look like JetStream here:

* Every output is published with ``stream=<its stream>`` and TestNatsBroker
  delivers a message that names a stream only to subscribers of a JStream of
  that name, so the taps below subscribe with the right JStream.
* TestNatsBroker's messages have no reply subject, so ``msg.raw_message.metadata``
  raises ``NotJSMessageError``; inputs are published with a ``$JS.ACK...``
  reply subject (what a pull consumer's messages carry) so the edge reads
  ``num_delivered`` and the stream sequence exactly as it does on a server.
"""

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from faststream.nats import JStream, NatsBroker, TestNatsBroker
from faststream.nats.annotations import NatsMessage

from kotae.contracts import AnswerV1, CommentV1, DeadLetterV1, RetrievalV1, subjects
from kotae.knowledge.records import load_records
from kotae.knowledge.store import KnowledgeStore
from kotae.services.retriever.handlers import build_router
from kotae.settings import Settings, load_settings

STAGE = "retriever"
IN_SUBJECT = subjects.COMMENT
IN_STREAM = subjects.stream_of(IN_SUBJECT)
SAMPLE_KB = Path(__file__).resolve().parents[3] / "kotae" / "samples" / "kb"
PUBLISHED_AT = datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)


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
    wire = Wire(broker, subjects.RETRIEVAL, subjects.ANSWER_ALL, subjects.DEADLETTER_ALL)
    return broker, wire


# --- fixtures ---------------------------------------------------------------------------


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    settings = load_settings(data_dir=tmp_path, inflight=1)
    KnowledgeStore(settings.kb_dir, "default").load(load_records(SAMPLE_KB))
    return settings


def comment(text: str, comment_id: str = "c-1") -> CommentV1:
    return CommentV1(
        comment_id=comment_id,
        stream_id="stream-1",
        author="viewer",
        text=text,
        normalized=text,
        lang="ja",
        published_at=PUBLISHED_AT,
    )


# --- tests ------------------------------------------------------------------------------


async def test_answerable_comment_goes_to_retrieval(settings: Settings) -> None:
    broker, wire = stage_broker(settings)
    c = comment("保育料っていくらになるの")
    async with TestNatsBroker(broker) as br:
        await send(br, c.model_dump_json().encode(), seq=1)

    out = wire.only()
    assert out.subject == subjects.RETRIEVAL
    retrieval = RetrievalV1.model_validate(out.body)
    assert retrieval.gate == "answer"
    assert retrieval.docs[0].doc_id == "childcare-2027"
    assert retrieval.comment == c
    assert (retrieval.comment_id, retrieval.stream_id) == ("c-1", "stream-1")
    assert retrieval.method == "bm25"
    assert out.headers["Nats-Msg-Id"] == f"c-1:{c.message_id}:{STAGE}:{subjects.RETRIEVAL}"
    assert out.headers["correlation_id"] == "c-1"


async def test_off_topic_comment_is_unanswered(settings: Settings) -> None:
    broker, wire = stage_broker(settings)
    c = comment("今日の天気は？", comment_id="c-2")
    async with TestNatsBroker(broker) as br:
        await send(br, c.model_dump_json().encode(), seq=1)

    out = wire.only()
    assert out.subject == subjects.answer("unanswered")
    answer = AnswerV1.model_validate(out.body)
    assert answer.outcome == "unanswered"
    assert answer.reason is not None and answer.reason.startswith("no_match")
    assert answer.comment == c
    assert answer.answer is None
    assert out.headers["Nats-Msg-Id"] == f"c-2:{c.message_id}:{STAGE}:{subjects.answer('unanswered')}"


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
    good = comment("保育料っていくらになるの", comment_id="c-after")
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
    assert "schema violation" in letter.error or "JSONDecodeError" in letter.error
    assert letter_seen.headers["Nats-Msg-Id"] == f"{STAGE}:deadletter:{IN_STREAM}:7"

    after = wire.only()
    assert after.subject == subjects.RETRIEVAL
    assert RetrievalV1.model_validate(after.body).comment_id == "c-after"


async def test_missing_knowledge_base_is_retried_then_dead_lettered_as_exhausted(tmp_path: Path) -> None:
    """KnowledgeBaseMissing is transient: nacked (nothing published) until the last delivery."""
    settings = load_settings(data_dir=tmp_path, inflight=1, max_deliver=3)  # no knowledge base loaded
    broker, wire = stage_broker(settings)
    c = comment("保育料っていくらになるの", comment_id="c-nokb")
    body = c.model_dump_json().encode()
    async with TestNatsBroker(broker) as br:
        for delivered in (1, 2):
            await br.publish(body, IN_SUBJECT, stream=IN_STREAM, reply_to=js_reply(3, delivered=delivered))
            assert wire.seen == []
        await br.publish(body, IN_SUBJECT, stream=IN_STREAM, reply_to=js_reply(3, delivered=3))

    out = wire.only()
    assert out.subject == subjects.deadletter(STAGE)
    letter = DeadLetterV1.model_validate(out.body)
    assert letter.error_type == "exhausted"
    assert letter.deliveries == 3
    assert "KnowledgeBaseMissing" in letter.error
    assert letter.comment_id == "c-nokb"
    assert letter.payload == body.decode()


async def test_poison_without_jetstream_metadata_is_still_dead_lettered(settings: Settings) -> None:
    broker, wire = stage_broker(settings)
    async with TestNatsBroker(broker) as br:
        await br.publish(b"not json", IN_SUBJECT, stream=IN_STREAM)  # no reply subject: not a JS message

    letter = DeadLetterV1.model_validate(wire.only().body)
    assert letter.error_type == "poison"
    assert letter.payload == "not json"
