"""The retriever's bus edge.

comment.v1 in on kotae.comment.v1; retrieval.v1 (gate answer), or an answer.v1
clarify/unanswered, out; poison input to kotae.deadletter.v1.retriever.

Two halves:

* On an in-memory broker (TestNatsBroker, no server): the gate's outcomes, the
  stream → knowledge base binding, dead letters. TestNatsBroker's JetStream is an
  ``AsyncMock``, so it has no key-value store: the handler looks up a pending
  ask-back for every comment that has an author, and reading the mock's "entry"
  fails. These comments are therefore anonymous (``author=""``), for which the
  handler neither reads nor writes the clarify store.
* Against a real nats-server (``nats_url``, ``running_stages``): everything that
  needs the clarify store in a JetStream KV bucket — the ask-back, the reply that
  picks a candidate, replies that do not.

How the in-memory broker is made to look like JetStream (taps on each output's
stream, inputs with a ``$JS.ACK...`` reply subject): tests/services/bus_harness.py.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import nats
import pytest
from faststream.nats import TestNatsBroker
from nats.js.errors import KeyNotFoundError

from kotae.clarify import BUCKET, ClarifyStore, PendingClarify, key_for
from kotae.contracts import AnswerV1, CommentV1, DeadLetterV1, Evidence, RetrievalV1, subjects
from kotae.knowledge.loading import load_knowledge_base
from kotae.knowledge.records import KBRecord, load_records
from kotae.services.retriever import STAGE as RETRIEVER
from kotae.settings import Settings, load_settings
from tests.integration.stages import running_stages
from tests.services.bus_harness import POISON, StageHarness

STAGE = "retriever"
IN_SUBJECT = subjects.COMMENT
IN_STREAM = subjects.stream_of(IN_SUBJECT)
SAMPLE_KB = Path(__file__).resolve().parents[3] / "kotae" / "samples" / "kb"
PUBLISHED_AT = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
BUS_TITLE = "公共交通：コミュニティバス運賃と新路線"
# Three policies of the sample make things free (nursery fees, school lunches, bus rides): the
# gate asks back naming them, the bus policy among them.
VAGUE_BUS = "無料になるの？"

PETS = KBRecord(
    id="pets",
    kind="doc",
    title="動物愛護",
    text="ペットの殺処分ゼロを目指します。保護犬と保護猫の譲渡会を毎月開きます。",
)
HARNESS = StageHarness(RETRIEVER)


# --- fixtures ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def kb_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data dir with the sample indexed as 'default' and a one-document 'pets' knowledge base."""
    data = tmp_path_factory.mktemp("retriever-handlers")
    base = load_settings(data_dir=data)
    load_knowledge_base(load_records(SAMPLE_KB), "default", base)
    load_knowledge_base([PETS], "pets", base)
    return data


@pytest.fixture
def settings(kb_dir: Path) -> Settings:
    return load_settings(data_dir=kb_dir, inflight=1)


def comment(
    text: str, comment_id: str = "c-1", *, author: str = "", stream_id: str = "stream-1", **kw: Any
) -> CommentV1:
    return CommentV1(
        comment_id=comment_id,
        stream_id=stream_id,
        author=author,
        text=text,
        normalized=text,
        lang="ja",
        published_at=PUBLISHED_AT,
        **kw,
    )


# --- in memory: outcomes ----------------------------------------------------------------


async def test_answerable_comment_goes_to_retrieval(settings: Settings) -> None:
    c = comment("保育料っていくらになるの")
    out = await HARNESS.only_output(settings, c)
    assert out.subject == subjects.RETRIEVAL
    retrieval = RetrievalV1.model_validate(out.body)
    assert retrieval.gate == "answer"
    assert retrieval.top_score >= settings.gate_answer
    assert retrieval.docs[0].doc_id == "childcare-2027"
    assert "faq-childcare-fee" in [f.faq_id for f in retrieval.faq]
    assert retrieval.comment == c
    assert (retrieval.comment_id, retrieval.stream_id) == ("c-1", "stream-1")
    assert retrieval.method == "hybrid"
    assert retrieval.kb == "default"
    assert retrieval.clarified_from is None
    assert out.headers["Nats-Msg-Id"] == f"c-1:{c.message_id}:{STAGE}:{subjects.RETRIEVAL}"
    assert out.headers["correlation_id"] == "c-1"


async def test_off_topic_comment_is_unanswered(settings: Settings) -> None:
    c = comment("今日の天気は？", comment_id="c-2")
    out = await HARNESS.only_output(settings, c)
    assert out.subject == subjects.answer("unanswered")
    answer = AnswerV1.model_validate(out.body)
    assert answer.outcome == "unanswered"
    assert answer.reason is not None and answer.reason.startswith("no_match")
    assert "below 0.20" in answer.reason
    assert answer.comment == c
    assert answer.answer is None
    assert answer.methods == {"retriever": "hybrid"}
    assert (
        out.headers["Nats-Msg-Id"] == f"c-2:{c.message_id}:{STAGE}:{subjects.ANSWER_PREFIX}"
    )  # one id for any outcome


async def test_vague_comment_asks_back_naming_the_candidates(settings: Settings) -> None:
    c = comment(VAGUE_BUS, comment_id="c-3")
    out = await HARNESS.only_output(settings, c)
    assert out.subject == subjects.answer("clarify")
    answer = AnswerV1.model_validate(out.body)
    assert answer.outcome == "clarify"
    assert BUS_TITLE in answer.candidates and 2 <= len(answer.candidates) <= 3
    assert answer.answer == answer.speech
    assert f"「{BUS_TITLE}」" in answer.answer and answer.answer.endswith("ご質問でしょうか？")
    assert "bus-fare-2027" in [d.doc_id for d in answer.docs]
    # The reason is the gate's own, not a fixed string.
    assert answer.reason is not None and answer.reason.startswith("clarify: best score ")
    assert answer.reason.endswith(f"{len(answer.candidates)} topics match the comment about as well")


async def test_thresholds_of_the_stage_settings_decide_the_outcome(kb_dir: Path) -> None:
    question = comment("保育料っていくらになるの")
    out = await HARNESS.only_output(load_settings(data_dir=kb_dir, inflight=1), question)
    assert out.subject == subjects.RETRIEVAL
    strict = load_settings(data_dir=kb_dir, inflight=1, gate_answer=0.99, gate_clarify=0.99, gate_strong=0.99)
    out = await HARNESS.only_output(strict, question)
    assert out.subject == subjects.answer("unanswered")
    reason = AnswerV1.model_validate(out.body).reason or ""
    assert reason.startswith("no_match: best score ") and reason.endswith(" below 0.99")  # the stage's own threshold


async def test_a_comment_whose_focus_no_record_has_is_unanswered_naming_it(settings: Settings) -> None:
    c = comment("消費税は下げてくれるの？", comment_id="c-tax")
    out = await HARNESS.only_output(settings, c)
    assert out.subject == subjects.answer("unanswered")
    answer = AnswerV1.model_validate(out.body)
    assert answer.reason == "not_covered: 「消費税」 is in no record of the knowledge base"
    assert answer.answer is None


async def test_the_stream_binding_decides_the_knowledge_base(kb_dir: Path) -> None:
    settings = load_settings(data_dir=kb_dir, inflight=1, kb_bindings="stream-pets=pets")
    broker, wire = HARNESS.stage_broker(settings)
    bound = comment("ペットの殺処分ゼロ", comment_id="c-pets", stream_id="stream-pets")
    # A comment cannot choose its knowledge base: its own ``kb`` field is not trusted.
    unbound = comment("ペットの殺処分ゼロ", comment_id="c-other", stream_id="stream-1", kb="pets")
    async with TestNatsBroker(broker) as br:
        await HARNESS.send(br, bound.model_dump_json().encode(), seq=1)
        await HARNESS.send(br, unbound.model_dump_json().encode(), seq=2)

    first, second = wire.seen
    assert first.subject == subjects.RETRIEVAL
    retrieval = RetrievalV1.model_validate(first.body)
    assert retrieval.kb == "pets"
    assert [d.doc_id for d in retrieval.docs] == ["pets"]
    assert second.subject == subjects.answer("unanswered")  # the sample has no pet policy
    assert "pets" not in [d.doc_id for d in AnswerV1.model_validate(second.body).docs]


# --- in memory: dead letters ------------------------------------------------------------


@pytest.mark.parametrize(("payload", "content_type", "comment_id"), POISON)
async def test_poison_is_dead_lettered_and_the_next_message_handled(
    settings: Settings, payload: bytes, content_type: str | None, comment_id: str | None
) -> None:
    good = comment("保育料っていくらになるの", comment_id="c-after")
    letter_seen, after = await HARNESS.poison_then(settings, payload, content_type, good)

    letter = HARNESS.assert_poison_letter(letter_seen, payload, comment_id)
    assert "schema violation" in letter.error or "JSONDecodeError" in letter.error
    assert after.subject == subjects.RETRIEVAL
    assert RetrievalV1.model_validate(after.body).comment_id == "c-after"


async def test_missing_knowledge_base_is_retried_then_fails_the_comment_and_dead_letters_it(tmp_path: Path) -> None:
    """KnowledgeBaseMissing is transient: nacked (nothing published) until the last delivery,
    then the comment ends ``failed`` with the reason and the input is dead-lettered."""
    settings = load_settings(data_dir=tmp_path, inflight=1, max_deliver=3)  # no knowledge base loaded
    broker, wire = HARNESS.stage_broker(settings)
    c = comment("保育料っていくらになるの", comment_id="c-nokb")
    body = c.model_dump_json().encode()
    async with TestNatsBroker(broker) as br:
        for delivered in (1, 2):
            await br.publish(body, IN_SUBJECT, stream=IN_STREAM, reply_to=HARNESS.js_reply(3, delivered=delivered))
            assert wire.seen == []
        await br.publish(body, IN_SUBJECT, stream=IN_STREAM, reply_to=HARNESS.js_reply(3, delivered=3))

    assert [s.subject for s in wire.seen] == [subjects.answer("failed"), subjects.deadletter(STAGE)]
    failed = AnswerV1.model_validate(wire.seen[0].body)
    assert failed.outcome == "failed" and "KnowledgeBaseMissing" in (failed.reason or "")
    letter = DeadLetterV1.model_validate(wire.seen[1].body)
    assert letter.error_type == "exhausted"
    assert letter.deliveries == 3
    assert "KnowledgeBaseMissing" in letter.error
    assert "'default'" in letter.error
    assert letter.comment_id == "c-nokb"
    assert letter.payload == body.decode()


async def test_unbound_stream_of_an_unloaded_knowledge_base_is_dead_lettered_naming_it(kb_dir: Path) -> None:
    settings = load_settings(data_dir=kb_dir, inflight=1, max_deliver=1, kb_bindings="stream-x=campaign-x")
    broker, wire = HARNESS.stage_broker(settings)
    async with TestNatsBroker(broker) as br:
        await HARNESS.send(br, comment("保育料", stream_id="stream-x").model_dump_json().encode(), seq=1)
    failed, out = wire.seen
    assert "campaign-x" in (AnswerV1.model_validate(failed.body).reason or "")
    letter = DeadLetterV1.model_validate(out.body)
    assert letter.error_type == "exhausted"
    assert "campaign-x" in letter.error


async def test_poison_without_jetstream_metadata_is_still_dead_lettered(settings: Settings) -> None:
    broker, wire = HARNESS.stage_broker(settings)
    async with TestNatsBroker(broker) as br:
        await br.publish(b"not json", IN_SUBJECT, stream=IN_STREAM)  # no reply subject: not a JS message

    letter = DeadLetterV1.model_validate(wire.only().body)
    assert letter.error_type == "poison"
    assert letter.payload == "not json"


# --- a real nats-server: the clarify store in a JetStream KV bucket ------------------------------


class Outputs:
    """Core-NATS subscriptions on the retriever's outputs, in arrival order."""

    def __init__(self, nc: nats.NATS) -> None:
        self.nc = nc
        self.js = nc.jetstream()
        self.queue: asyncio.Queue[tuple[str, dict[str, Any]]] = asyncio.Queue()

    async def start(self) -> Outputs:
        async def collect(msg: Any) -> None:
            await self.queue.put((msg.subject, json.loads(msg.data)))

        for pattern in (subjects.RETRIEVAL, subjects.ANSWER_ALL, subjects.DEADLETTER_ALL):
            await self.nc.subscribe(pattern, cb=collect)
        await self.nc.flush()
        return self

    async def send(self, c: CommentV1) -> None:
        await self.js.publish(IN_SUBJECT, c.model_dump_json().encode(), headers={"content-type": "application/json"})

    async def next(self, timeout: float = 15.0) -> tuple[str, dict[str, Any]]:
        return await asyncio.wait_for(self.queue.get(), timeout)

    async def pending(self, stream_id: str, author: str) -> PendingClarify | None:
        kv = await self.js.key_value(BUCKET)
        try:
            entry = await kv.get(key_for(stream_id, author))
        except KeyNotFoundError:
            return None
        return PendingClarify.model_validate_json(entry.value) if entry.value else None


@pytest.fixture
async def bus(nats_url: str, kb_dir: Path) -> AsyncIterator[Outputs]:
    """The retriever stage on a fresh nats-server, and a connection watching its outputs."""
    settings = load_settings(data_dir=kb_dir, retry_backoff_s=0.05, max_deliver=3, ack_wait_s=5.0, inflight=1)
    nc = await nats.connect(nats_url)
    try:
        # The bucket exists before the first comment (the stage opens it with the same config).
        await ClarifyStore.open(nc.jetstream(), settings.clarify_ttl_s)
        async with running_stages(settings, nats_url, stages=(STAGE,)):
            yield await Outputs(nc).start()
    finally:
        await nc.close()


def live(text: str, comment_id: str, author: str, stream_id: str) -> CommentV1:
    return comment(text, comment_id, author=author, stream_id=stream_id)


async def test_clarify_round_trip_through_the_kv_store(bus: Outputs) -> None:
    stream = f"s-{uuid.uuid4().hex[:8]}"
    question = live(VAGUE_BUS, "q-1", "バス通勤勢", stream)
    await bus.send(question)
    subject, body = await bus.next()
    assert subject == subjects.answer("clarify")
    ask = AnswerV1.model_validate(body)
    assert BUS_TITLE in ask.candidates

    stored = await bus.pending(stream, "バス通勤勢")
    assert stored is not None
    assert (stored.comment_id, stored.question, stored.kb) == ("q-1", VAGUE_BUS, "default")
    # Only the documents the ask-back named are kept as candidates.
    assert [d.doc_id for d in stored.docs] == [d.doc_id for d in ask.docs if d.title in ask.candidates]

    # Someone else naming the same topic is a new comment, not a reply to this ask-back.
    await bus.send(live("コミュニティバスのこと", "o-1", "通りすがり", stream))
    subject, body = await bus.next()
    if subject == subjects.RETRIEVAL:
        assert RetrievalV1.model_validate(body).clarified_from is None
    assert await bus.pending(stream, "バス通勤勢") is not None

    reply = live("コミュニティバスのこと", "r-1", "バス通勤勢", stream)
    await bus.send(reply)
    subject, body = await bus.next()
    assert subject == subjects.RETRIEVAL
    retrieval = RetrievalV1.model_validate(body)
    assert retrieval.gate == "answer"
    assert retrieval.method == "hybrid+clarified"
    assert retrieval.clarified_from == "q-1"
    assert retrieval.comment_id == "r-1"
    assert retrieval.comment.normalized == f"{VAGUE_BUS} コミュニティバスのこと"
    assert retrieval.docs[0].doc_id == "bus-fare-2027"
    assert retrieval.top_score == retrieval.docs[0].score
    assert retrieval.kb == "default"
    assert await bus.pending(stream, "バス通勤勢") is None  # used once


async def test_a_reply_naming_no_candidate_is_retrieved_as_a_new_comment(bus: Outputs) -> None:
    stream = f"s-{uuid.uuid4().hex[:8]}"
    await bus.send(live(VAGUE_BUS, "q-2", "viewer", stream))
    assert (await bus.next())[0] == subjects.answer("clarify")

    await bus.send(live("今日の天気は？", "r-2", "viewer", stream))
    subject, body = await bus.next()
    assert subject == subjects.answer("unanswered")
    answer = AnswerV1.model_validate(body)
    assert answer.comment.normalized == "今日の天気は？"  # not joined to the question
    assert answer.reason is not None and answer.reason.startswith("no_match")


async def test_a_new_question_after_an_ask_back_is_not_taken_for_a_reply(bus: Outputs) -> None:
    stream = f"s-{uuid.uuid4().hex[:8]}"
    await bus.send(live(VAGUE_BUS, "q-3", "viewer", stream))
    subject, body = await bus.next()
    assert BUS_TITLE in AnswerV1.model_validate(body).candidates  # the bus policy was offered

    await bus.send(live("期日前投票はいつからできますか", "r-3", "viewer", stream))
    subject, body = await bus.next()
    assert subject == subjects.RETRIEVAL
    retrieval = RetrievalV1.model_validate(body)
    assert retrieval.docs[0].doc_id == "how-to-vote-2027"
    assert retrieval.comment.normalized == "期日前投票はいつからできますか"
    assert retrieval.clarified_from is None and retrieval.method == "hybrid"


async def test_an_anonymous_ask_back_stores_nothing(bus: Outputs) -> None:
    stream = f"s-{uuid.uuid4().hex[:8]}"
    await bus.send(live(VAGUE_BUS, "q-4", "", stream))
    assert (await bus.next())[0] == subjects.answer("clarify")
    assert await bus.pending(stream, "") is None


async def test_a_pending_ask_back_of_another_knowledge_base_is_not_used(bus: Outputs) -> None:
    stream = f"s-{uuid.uuid4().hex[:8]}"
    bus_doc = Evidence(
        doc_id="bus-fare-2027", chunk_id="bus-fare-2027#x", title=BUS_TITLE, text="運賃は150円です。", score=0.4
    )
    store = ClarifyStore(await bus.js.key_value(BUCKET))
    await store.put(
        stream, "viewer", PendingClarify(comment_id="q-old", question=VAGUE_BUS, kb="campaign-x", docs=[bus_doc])
    )

    await bus.send(live("コミュニティバスのこと", "r-5", "viewer", stream))
    subject, body = await bus.next()
    if subject == subjects.RETRIEVAL:
        assert RetrievalV1.model_validate(body).clarified_from is None
    else:
        assert AnswerV1.model_validate(body).comment.normalized == "コミュニティバスのこと"


async def test_an_unreadable_pending_entry_does_not_poison_the_viewers_comments(bus: Outputs) -> None:
    stream = f"s-{uuid.uuid4().hex[:8]}"
    kv = await bus.js.key_value(BUCKET)
    await kv.put(key_for(stream, "viewer"), b'{"comment_id": "q-old"}')  # e.g. written by an older kotae

    await bus.send(live("保育料っていくらになるの", "c-ok", "viewer", stream))
    subject, body = await bus.next()
    assert subject == subjects.RETRIEVAL, body.get("error")
