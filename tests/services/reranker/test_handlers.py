"""The reranker's bus edge on an in-memory broker (TestNatsBroker, no server).

retrieval.v1 in on kotae.retrieval.v1; rerank.v1 on kotae.rerank.v1, or an
unanswered answer.v1, out; poison input to kotae.deadletter.v1.reranker.
The in-memory bus (and why inputs carry a ``$JS.ACK...`` reply subject) is
tests/services/bus_harness.py.
"""

from pathlib import Path

import pytest

from kotae.contracts import AnswerV1, RerankV1, subjects
from kotae.services.reranker import STAGE as RERANKER
from kotae.settings import Settings, load_settings
from tests.factories import FAQ, evidence, retrieval
from tests.services.bus_harness import POISON, StageHarness

STAGE = "reranker"
HARNESS = StageHarness(RERANKER)


# --- messages ---------------------------------------------------------------------------


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings(data_dir=tmp_path, inflight=1)


# --- tests ------------------------------------------------------------------------------


async def test_keeps_top_n_in_order_with_the_top_docs_slide(settings: Settings) -> None:
    docs = [evidence(i, slide) for i, slide in enumerate([7, 3, "appendix", 1, 2, 5])]
    r = retrieval(docs, [FAQ])
    out = await HARNESS.only_output(settings, r)
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
    out = await HARNESS.only_output(settings, retrieval([], [FAQ]))
    assert out.subject == subjects.RERANK
    rerank = RerankV1.model_validate(out.body)
    assert rerank.docs == []
    assert rerank.slide == 9


async def test_no_docs_and_no_faq_is_unanswered(settings: Settings) -> None:
    r = retrieval([], [], comment_id="c-empty")
    out = await HARNESS.only_output(settings, r)
    assert out.subject == subjects.answer("unanswered")
    answer = AnswerV1.model_validate(out.body)
    assert answer.outcome == "unanswered"
    assert answer.reason is not None and answer.reason.startswith("rerank_empty")
    assert answer.comment == r.comment
    assert answer.comment_id == "c-empty"


@pytest.mark.parametrize(("payload", "content_type", "comment_id"), POISON)
async def test_poison_is_dead_lettered_and_the_next_message_handled(
    settings: Settings, payload: bytes, content_type: str | None, comment_id: str | None
) -> None:
    good = retrieval([evidence(0, 4)], [], comment_id="c-after")
    letter_seen, after = await HARNESS.poison_then(settings, payload, content_type, good)

    HARNESS.assert_poison_letter(letter_seen, payload, comment_id)
    assert after.subject == subjects.RERANK
    assert RerankV1.model_validate(after.body).comment_id == "c-after"
