"""A full pipeline run against a real nats-server: outcomes, traces, dead letters, dedupe."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

import nats
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from kotae.contracts import CommentV1, DeadLetterV1, subjects
from kotae.replay import run_replay
from kotae.services.ingest.sources import RawComment, read_comment_file
from kotae.settings import Settings
from tests.factories import read_all
from tests.integration.stages import running_stages

TERMINAL = {"verified", "rejected", "clarify", "unanswered", "dropped", "dead_lettered"}
AT = datetime(2026, 11, 30, 20, 0, tzinfo=UTC)


def comment(cid: str, text: str) -> RawComment:
    return RawComment(id=cid, author="viewer", text=text, published_at=AT)


async def test_sample_comments_each_end_in_exactly_one_terminal_outcome(
    nats_url: str, loaded_settings: Settings, sample_comments_path
) -> None:
    comments = read_comment_file(sample_comments_path)
    async with running_stages(loaded_settings, nats_url):
        result = await run_replay(loaded_settings, nats_url, comments, timeout=60)
    unique = list(dict.fromkeys(c.id for c in comments))
    assert result.missing == []
    assert [r["comment_id"] for r in result.ordered()] == unique
    assert all(r["outcome"] in TERMINAL for r in result.ordered())
    assert result.resends == len(comments) - len(unique)
    # Nothing was published twice: one answer per comment on the answers stream.
    answers = await read_all(nats_url, subjects.ANSWER_ALL)
    ids = [a["data"]["comment_id"] for a in answers]
    assert sorted(ids) == sorted(unique)
    by_id = {r["comment_id"]: r for r in result.ordered()}
    assert by_id["c003"]["outcome"] == "verified"
    assert by_id["c003"]["citations"][0]["doc_id"] == "childcare-2027"
    assert by_id["c008"]["outcome"] == "dropped"  # 草
    assert by_id["c020"]["outcome"] == "unanswered"  # the weather: not in the knowledge base


async def test_one_comment_is_one_trace_across_every_stage(nats_url: str, loaded_settings: Settings) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    async with running_stages(loaded_settings, nats_url, tracer_provider=provider):
        result = await run_replay(
            loaded_settings,
            nats_url,
            [comment("t1", "保育料っていくらになるの")],
            timeout=30,
            tracer_provider=provider,
            wait_for_evaluations=10,
        )
    record = result.records["t1"]
    assert record["outcome"] == "verified"
    assert record["trace_id"]
    spans = exporter.get_finished_spans()
    traced = [s for s in spans if format(s.context.trace_id, "032x") == record["trace_id"]]
    consumed = {s.attributes.get("messaging.destination_publish.name") for s in traced if s.name.endswith("process")}
    # The comment's spans in ingest and every stage, evaluation included, share one trace id.
    assert {subjects.COMMENT, subjects.RETRIEVAL, subjects.RERANK, subjects.DRAFT} <= consumed
    assert any(s.name == "ingest" for s in traced)
    assert any(s.attributes.get("messaging.destination.name") == subjects.EVALUATION for s in traced)
    other = [s for s in spans if s.attributes.get("messaging.message.conversation_id") == "t1" and s not in traced]
    assert other == []


async def test_without_an_exporter_every_message_of_a_comment_carries_its_trace_id(
    nats_url: str, loaded_settings: Settings
) -> None:
    # The embedded default: no process records spans, the trace context is only passed on.
    async with running_stages(loaded_settings, nats_url):
        result = await run_replay(
            loaded_settings, nats_url, [comment("t2", "保育料っていくらになるの")], timeout=30, wait_for_evaluations=10
        )
    record = result.records["t2"]
    assert record["outcome"] == "verified"
    trace_id = record["trace_id"]
    assert trace_id and int(trace_id, 16) != 0
    carried = {}
    for subject in (
        subjects.COMMENT,
        subjects.RETRIEVAL,
        subjects.RERANK,
        subjects.DRAFT,
        subjects.ANSWER_ALL,
        subjects.EVALUATION,
    ):
        for m in await read_all(nats_url, subject):
            if m["data"].get("comment_id") == "t2":
                # traceparent: version-trace_id-parent_id-flags
                carried[m["subject"]] = m["headers"].get("traceparent", "").split("-")[1:2]
    assert set(carried) == {
        subjects.COMMENT,
        subjects.RETRIEVAL,
        subjects.RERANK,
        subjects.DRAFT,
        subjects.answer("verified"),
        subjects.EVALUATION,
    }
    assert {subject: ids for subject, ids in carried.items() if ids != [trace_id]} == {}


@pytest.mark.parametrize(
    "stage,subject",
    [
        ("retriever", subjects.COMMENT),
        ("reranker", subjects.RETRIEVAL),
        ("generator", subjects.RERANK),
        ("verifier", subjects.DRAFT),
        ("evaluator", subjects.answer("verified")),
    ],
)
async def test_malformed_input_is_dead_lettered_and_the_stage_keeps_serving(
    nats_url: str, loaded_settings: Settings, stage: str, subject: str
) -> None:
    async with running_stages(loaded_settings, nats_url):
        nc = await nats.connect(nats_url)
        js = nc.jetstream()
        await js.publish(subject, b"\xff not json")
        await js.publish(subject, json.dumps({"comment_id": "bad-1", "stream_id": "s"}).encode())
        # A valid comment afterwards still goes all the way through.
        result = await run_replay(loaded_settings, nats_url, [comment("ok-1", "保育料っていくらになるの")], timeout=30)
        await nc.close()
        letters = []
        for _ in range(50):
            letters = [m for m in await read_all(nats_url, subjects.deadletter(stage), idle=0.2)]
            if len(letters) >= 2:
                break
    assert result.records["ok-1"]["outcome"] == "verified"
    parsed = [DeadLetterV1.model_validate(m["data"]) for m in letters]
    assert len(parsed) == 2
    assert all(p.stage == stage and p.error_type == "poison" and p.subject == subject for p in parsed)
    binary = next(p for p in parsed if p.payload_encoding == "base64")
    assert binary.error
    schema = next(p for p in parsed if p.comment_id == "bad-1")
    assert "Field required" in schema.error
    assert json.loads(schema.payload) == {"comment_id": "bad-1", "stream_id": "s"}


async def test_oversized_input_is_dead_lettered_with_the_limit_named(nats_url: str, loaded_settings: Settings) -> None:
    settings = loaded_settings.model_copy(update={"max_payload_bytes": 2048})
    big = CommentV1(
        comment_id="huge", stream_id="s", author="a", text="あ" * 900, normalized="あ" * 900
    )  # over 2 KiB, under the stream limit
    async with running_stages(settings, nats_url, stages=("retriever",)):
        nc = await nats.connect(nats_url)
        await nc.jetstream().publish(subjects.COMMENT, big.model_dump_json().encode())
        await nc.close()
        letters = []
        for _ in range(50):
            letters = await read_all(nats_url, subjects.deadletter("retriever"), idle=0.2)
            if letters:
                break
    assert len(letters) == 1
    assert "KOTAE_MAX_PAYLOAD_BYTES" in letters[0]["data"]["error"]
    assert letters[0]["data"]["comment_id"] == "huge"


async def test_redelivered_input_never_duplicates_downstream(nats_url: str, loaded_settings: Settings) -> None:
    """The same stored comment processed twice (as after a crash before the ack) yields one retrieval."""
    c = CommentV1(
        comment_id="dup-1",
        stream_id="s",
        author="a",
        text="保育料っていくらになるの",
        normalized="保育料っていくらになるの",
        published_at=AT,
    )
    payload = c.model_dump_json().encode()
    async with running_stages(loaded_settings, nats_url, stages=("retriever",)):
        nc = await nats.connect(nats_url)
        js = nc.jetstream()
        await js.publish(subjects.COMMENT, payload)  # two stored copies of one message,
        await js.publish(subjects.COMMENT, payload)  # as a redelivery would present it
        await nc.close()
        got = []
        for _ in range(30):
            got = await read_all(nats_url, subjects.RETRIEVAL, idle=0.2)
            if got:
                await asyncio.sleep(0.3)
                got = await read_all(nats_url, subjects.RETRIEVAL, idle=0.2)
                break
    assert len(got) == 1
    assert got[0]["headers"]["Nats-Msg-Id"].startswith(f"dup-1:{c.message_id}:retriever:")
