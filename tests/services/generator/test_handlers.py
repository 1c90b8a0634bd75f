"""The generator's bus edge on an in-memory broker (TestNatsBroker, no server).

rerank.v1 in on kotae.rerank.v1; draft.v1 on kotae.draft.v1, or the fixed
not-found sentence as an unanswered answer.v1, out; poison input to
kotae.deadletter.v1.generator. The in-memory bus (and why inputs carry a
``$JS.ACK...`` reply subject) is tests/services/bus_harness.py.
"""

from pathlib import Path

import pytest

from kotae.citations import MARKER
from kotae.contracts import AnswerV1, DraftV1, Evidence, subjects
from kotae.services.generator import STAGE as GENERATOR
from kotae.services.generator.logic import NOT_FOUND
from kotae.settings import Settings, load_settings
from tests.factories import BUS, CHILDCARE, rerank
from tests.services.bus_harness import POISON, StageHarness

STAGE = "generator"
HARNESS = StageHarness(GENERATOR)


# --- messages ---------------------------------------------------------------------------


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings(data_dir=tmp_path, inflight=1)


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
