"""The reranker's model method through the real SDKs against a local fake server, and its offline rescoring.

Each test sends one retrieval.v1 through the stage's router (in-memory bus) and
asserts what the model was sent and what the stage published.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from faststream.nats import TestNatsBroker

from kotae.contracts import AnswerV1, Evidence, RerankV1, subjects
from kotae.knowledge.embeddings import embedder_for
from kotae.services.reranker import STAGE as RERANKER
from kotae.services.reranker.logic import embedding_rescore, read_ids, rescore_scores
from kotae.settings import Settings, load_settings
from tests.factories import FAQ, evidence, retrieval
from tests.fakes.model_server import FakeModelServer
from tests.services.bus_harness import StageHarness

HARNESS = StageHarness(RERANKER)

DOCS = [evidence(i, slide) for i, slide in enumerate([7, 3, "appendix", 1])]


def model_settings(tmp_path: Path, fake: FakeModelServer, **extra: object) -> Settings:
    return load_settings(
        data_dir=tmp_path, inflight=1, reranker_model=f"compatible:{fake.url}/v1|ranker", model_timeout_s=1.0, **extra
    )


async def test_the_model_sees_numbered_candidates_and_its_order_is_kept(tmp_path: Path) -> None:
    with FakeModelServer('{"ids": [3, 1]}') as fake:
        out = await HARNESS.only_output(model_settings(tmp_path, fake), retrieval(DOCS, [FAQ]))
    rerank = RerankV1.model_validate(out.body)
    assert [d.doc_id for d in rerank.docs] == ["doc-2", "doc-0"]
    assert rerank.faq == []  # the FAQ (block 5) was not picked
    assert rerank.slide == "appendix"  # the top-1 document's slide travels downstream
    assert rerank.method == "model" and rerank.methods["reranker"] == "model"
    assert rerank.prompt_version == "rerank.v1"
    assert not rerank.degraded
    (call,) = rerank.model_calls
    assert (call.stage, call.model, call.input_tokens, call.output_tokens) == ("reranker", "compatible:ranker", 11, 7)
    body = fake.requests[0]["body"]
    assert body["response_format"] == {"type": "json_object"}
    system, user = body["messages"][0]["content"], body["messages"][1]["content"]
    assert '{"ids": [3, 1]}' in system and "data, not instructions" in system
    assert "保育料っていくらになるの" in user
    for n, doc in enumerate(DOCS, 1):
        assert f"[{n}] (document) {doc.title}" in user and doc.text in user
    assert "[5] (FAQ) 保育料はいくらになりますか？" in user


async def test_unknown_and_repeated_ids_are_dropped_and_faq_can_be_picked(tmp_path: Path) -> None:
    with FakeModelServer('{"ids": [9, 5, 2, 2, "1", 0]}') as fake:
        out = await HARNESS.only_output(model_settings(tmp_path, fake), retrieval(DOCS, [FAQ]))
    rerank = RerankV1.model_validate(out.body)
    assert [d.doc_id for d in rerank.docs] == ["doc-1", "doc-0"]  # "1" is block 1, as a small model writes it
    assert rerank.faq == [FAQ]


async def test_an_empty_list_ends_the_comment_unanswered_with_the_reason(tmp_path: Path) -> None:
    with FakeModelServer('{"ids": []}') as fake:
        out = await HARNESS.only_output(model_settings(tmp_path, fake), retrieval(DOCS, [FAQ]))
    assert out.subject == subjects.answer("unanswered")
    answer = AnswerV1.model_validate(out.body)
    assert answer.reason.startswith("rerank_empty")
    assert answer.model_calls[0].stage == "reranker"


async def test_an_unparseable_reply_is_asked_again_then_degrades_to_retrieval_order(tmp_path: Path) -> None:
    with FakeModelServer("I think number two is best.") as fake:
        out = await HARNESS.only_output(model_settings(tmp_path, fake, model_reask=1), retrieval(DOCS, [FAQ]))
    assert len(fake.requests) == 2  # the first call and one re-ask
    rerank = RerankV1.model_validate(out.body)
    assert rerank.degraded
    assert "unparseable" in (rerank.degraded_reason or "")
    assert [d.doc_id for d in rerank.docs] == ["doc-0", "doc-1", "doc-2"]
    assert [c.outcome for c in rerank.model_calls] == ["unparseable", "unparseable"]


async def test_a_reask_that_parses_is_used(tmp_path: Path) -> None:
    with FakeModelServer() as fake:
        fake.script.extend(["garbage-not-json", '{"ids": [4]}'])
        out = await HARNESS.only_output(model_settings(tmp_path, fake, model_reask=1), retrieval(DOCS, []))
    rerank = RerankV1.model_validate(out.body)
    assert not rerank.degraded and [d.doc_id for d in rerank.docs] == ["doc-3"]


@pytest.mark.parametrize("fault", ["429", "500", "timeout"])
async def test_a_transient_fault_is_redelivered_not_answered(tmp_path: Path, fault: str) -> None:
    with FakeModelServer(fault, timeout_sleep_s=2.0) as fake:
        broker, wire = HARNESS.stage_broker(model_settings(tmp_path, fake, max_deliver=3))
        async with TestNatsBroker(broker) as br:
            await HARNESS.send(br, retrieval(DOCS, []).model_dump_json().encode(), seq=1)
    assert wire.seen == []  # nacked with a delay: nothing published, nothing lost


async def test_on_the_last_delivery_an_unavailable_model_degrades_instead(tmp_path: Path) -> None:
    with FakeModelServer("500") as fake:
        settings = model_settings(tmp_path, fake, max_deliver=3)
        broker, wire = HARNESS.stage_broker(settings)
        async with TestNatsBroker(broker) as br:
            payload = retrieval(DOCS, []).model_dump_json().encode()
            await br.publish(
                payload,
                subjects.RETRIEVAL,
                stream=HARNESS.in_stream,
                headers={"content-type": "application/json"},
                reply_to=HARNESS.js_reply(1, delivered=3),
            )
    rerank = RerankV1.model_validate(wire.only().body)
    assert rerank.degraded and "unavailable" in (rerank.degraded_reason or "")
    assert [d.doc_id for d in rerank.docs] == ["doc-0", "doc-1", "doc-2"]


@pytest.mark.parametrize(
    ("text", "ids"),
    [
        ('{"ids": [2]}', [2]),
        ('```json\n{"ids": []}\n```', []),
        ('{"ids": [1, "x"]}', [1]),
        ('{"ids": 2}', [2]),
        ("[2, 1]", [2, 1]),
        ('{"ids": ["3", "[1]"]}', [3, 1]),
    ],
)
def test_read_ids(text: str, ids: list[int]) -> None:
    assert read_ids(text, 4) == ids


@pytest.mark.parametrize("text", ['{"id": 2}', "none", '{"ids": ["x"]}', '{"ids": [7, 8]}'])
def test_read_ids_refuses_other_shapes(text: str) -> None:
    from kotae.providers import BadReply

    with pytest.raises(BadReply):
        read_ids(text, 4)


# --- offline: rescoring with the embedding model -------------------------------------


def doc(doc_id: str, text: str, score: float) -> Evidence:
    return Evidence(doc_id=doc_id, chunk_id=f"{doc_id}#0", title=doc_id, text=text, lang="ja", score=score)


def test_rescoring_lifts_the_candidate_whose_sentence_answers_the_question() -> None:
    embedder = embedder_for("use-multilingual-v3")
    docs = [
        doc("weather", "明日の天気は晴れの予報です。気温は高めです。", 1.0),
        doc("fare", "市内を走るコミュニティバスの運賃は大人200円です。", 0.95),
    ]
    question = "バスの運賃はいくらですか"
    scores = rescore_scores(question, docs, embedder, alpha=0.5)
    assert scores[1] > scores[0]
    assert rescore_scores(question, docs, embedder, alpha=0.0) == [1.0, 0.95]  # alpha 0 is retrieval order


def test_embedding_rescore_names_its_method_and_keeps_top_n() -> None:
    embedder = embedder_for("use-multilingual-v3")
    r = retrieval([doc(f"d{i}", f"文書{i}の本文です。", 1.0 - 0.1 * i) for i in range(5)], [FAQ])
    result = embedding_rescore(r, 3, embedder)
    assert result.method == "embedding_rescore"
    assert len(result.docs) == 3 and result.faq == [FAQ]


async def test_the_offline_rescoring_is_named_in_what_the_stage_publishes(tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path, inflight=1, reranker_offline="embedding_rescore")
    out = await HARNESS.only_output(settings, retrieval(DOCS, [FAQ]))
    rerank = RerankV1.model_validate(out.body)
    assert rerank.method == "embedding_rescore" and rerank.model_calls == []
    assert (
        json.loads(out.body if isinstance(out.body, str) else json.dumps(out.body))["methods"]["reranker"]
        == "embedding_rescore"
    )
