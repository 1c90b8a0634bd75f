"""The generator's bus edge on an in-memory broker (TestNatsBroker, no server).

rerank.v1 in on kotae.rerank.v1; draft.v1 on kotae.draft.v1, or the fixed
not-found sentence as an unanswered answer.v1, out; poison input to
kotae.deadletter.v1.generator. The in-memory bus (and why inputs carry a
``$JS.ACK...`` reply subject) is tests/services/bus_harness.py.
"""

from datetime import datetime, timezone
from pathlib import Path

import pytest

from kotae.citations import MARKER
from kotae.contracts import AnswerV1, CommentV1, DraftV1, Evidence, RerankV1, subjects
from kotae.services.generator.handlers import build_router
from kotae.services.generator.logic import NOT_FOUND
from kotae.settings import Settings, load_settings

from tests.services.bus_harness import POISON, StageHarness

STAGE = "generator"
HARNESS = StageHarness(
    STAGE, subjects.RERANK, build_router, outputs=(subjects.DRAFT, subjects.ANSWER_ALL, subjects.DEADLETTER_ALL)
)


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
    out = await HARNESS.only_output(settings, r)
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
    out = await HARNESS.only_output(settings, r)
    assert out.subject == subjects.answer("unanswered")
    answer = AnswerV1.model_validate(out.body)
    assert answer.outcome == "unanswered"
    assert answer.answer == NOT_FOUND["ja"]
    assert answer.speech == NOT_FOUND["ja"]
    assert answer.citations == []
    assert answer.reason is not None and answer.reason.startswith("not_found")
    assert answer.docs == [BUS]
    assert answer.comment_id == "c-nf"


@pytest.mark.parametrize(("payload", "content_type", "comment_id"), POISON)
async def test_poison_is_dead_lettered_and_the_next_message_handled(
    settings: Settings, payload: bytes, content_type: str | None, comment_id: str | None
) -> None:
    good = rerank("保育料っていくらになるの", [CHILDCARE], comment_id="c-after")
    letter_seen, after = await HARNESS.poison_then(settings, payload, content_type, good)

    HARNESS.assert_poison_letter(letter_seen, payload, comment_id)
    assert after.subject == subjects.DRAFT
    assert DraftV1.model_validate(after.body).comment_id == "c-after"
