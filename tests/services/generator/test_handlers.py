"""The generator's bus edge on an in-memory broker (TestNatsBroker, no server).

rerank.v1 in on kotae.rerank.v1; draft.v1 on kotae.draft.v1, or the fixed
not-found sentence as an unanswered answer.v1, out; poison input to
kotae.deadletter.v1.generator.

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

from kotae.citations import MARKER
from kotae.contracts import AnswerV1, CommentV1, DeadLetterV1, DraftV1, Evidence, RerankV1, subjects
from kotae.services.generator.handlers import build_router
from kotae.services.generator.logic import NOT_FOUND
from kotae.settings import Settings, load_settings

STAGE = "generator"
IN_SUBJECT = subjects.RERANK
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
    wire = Wire(broker, subjects.DRAFT, subjects.ANSWER_ALL, subjects.DEADLETTER_ALL)
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
        "第2子以降の保育料は無料にします。病児保育の利用料は1日500円にします。"
    ),
    source="政策集2027 p.4",
    slide=4,
    lang="ja",
    score=0.9,
)
BUS = Evidence(
    doc_id="bus-fare-2027",
    chunk_id="bus-fare-2027#b",
    title="公共交通：コミュニティバス運賃と新路線",
    text=(
        "公共交通：コミュニティバス運賃と新路線\n"
        "市のコミュニティバス「みなとループ」の運賃を、大人1回150円にします。"
        "小学生以下と70歳以上の方は無料で乗れます。"
    ),
    source="政策集2027 p.6",
    slide=6,
    lang="ja",
    score=0.5,
)


def rerank(question: str, docs: list[Evidence], comment_id: str = "c-1") -> RerankV1:
    comment = CommentV1(
        comment_id=comment_id,
        stream_id="stream-1",
        author="viewer",
        text=question,
        normalized=question,
        published_at=datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc),
    )
    return RerankV1(
        comment_id=comment_id,
        stream_id="stream-1",
        comment=comment,
        docs=docs,
        top_score=0.9,
        method="keep_top_n",
        slide=docs[0].slide if docs else None,
        methods={"retriever": "bm25", "reranker": "keep_top_n"},
    )


# --- tests ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "cited_doc"),
    [
        pytest.param("保育料っていくらになるの", CHILDCARE, id="first-doc"),
        pytest.param("バスの運賃はいくら？", BUS, id="second-doc"),
    ],
)
async def test_draft_cites_the_given_docs(settings: Settings, question: str, cited_doc: Evidence) -> None:
    r = rerank(question, [CHILDCARE, BUS])
    broker, wire = stage_broker(settings)
    async with TestNatsBroker(broker) as br:
        await send(br, r.model_dump_json().encode(), seq=1)

    out = wire.only()
    assert out.subject == subjects.DRAFT
    draft = DraftV1.model_validate(out.body)
    assert draft.citation_check.ok is True
    assert draft.not_found is False
    assert draft.docs == r.docs
    assert draft.comment == r.comment
    assert draft.slide == r.slide
    assert draft.methods == {"retriever": "bm25", "reranker": "keep_top_n", "generator": draft.method}

    # Every [N] in the answer has a citation, and every citation is the N-th given document.
    markers = {int(n) for n in MARKER.findall(draft.answer)}
    assert markers and markers == {c.n for c in draft.citations}
    for c in draft.citations:
        doc = r.docs[c.n - 1]
        assert (c.doc_id, c.chunk_id, c.source, c.slide) == (doc.doc_id, doc.chunk_id, doc.source, doc.slide)
    assert [c.doc_id for c in draft.citations] == [cited_doc.doc_id]
    assert not MARKER.search(draft.speech)
    assert out.headers["Nats-Msg-Id"] == f"c-1:{r.comment.message_id}:{STAGE}:{subjects.DRAFT}"


async def test_evidence_that_does_not_answer_is_unanswered_with_the_not_found_sentence(settings: Settings) -> None:
    r = rerank("保育料っていくらになるの", [BUS], comment_id="c-nf")
    broker, wire = stage_broker(settings)
    async with TestNatsBroker(broker) as br:
        await send(br, r.model_dump_json().encode(), seq=1)

    out = wire.only()
    assert out.subject == subjects.answer("unanswered")
    answer = AnswerV1.model_validate(out.body)
    assert answer.outcome == "unanswered"
    assert answer.answer == NOT_FOUND["ja"]
    assert answer.speech == NOT_FOUND["ja"]
    assert answer.citations == []
    assert answer.reason is not None and answer.reason.startswith("not_found")
    assert answer.docs == [BUS]
    assert answer.comment_id == "c-nf"


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
    good = rerank("保育料っていくらになるの", [CHILDCARE], comment_id="c-after")
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
    assert after.subject == subjects.DRAFT
    assert DraftV1.model_validate(after.body).comment_id == "c-after"
