"""kotae.services.evaluator.logic.evaluate: offline scores of one answer."""

from __future__ import annotations

import pytest

from kotae.contracts import AnswerV1, Citation, CommentV1, Evidence
from kotae.services.evaluator.logic import evaluate

CHILDCARE = Evidence(
    doc_id="childcare-2027",
    chunk_id="childcare-2027#a",
    text="0〜2歳児の保育料は月額1万5千円を上限にします。第2子以降の保育料は無料にします。",
    lang="ja",
)
BUS = Evidence(
    doc_id="bus-fare-2027", chunk_id="bus#a", text="コミュニティバスの運賃を大人1回150円にします。", lang="ja"
)


def comment(text: str = "保育料っていくらになるの") -> CommentV1:
    return CommentV1(comment_id="c1", stream_id="s1", author="viewer", text=text, normalized=text, lang="ja")


def answer(**kw: object) -> AnswerV1:
    fields: dict[str, object] = dict(
        comment_id="c1",
        stream_id="s1",
        comment=comment(),
        outcome="verified",
        answer="0〜2歳児の保育料は月額1万5千円を上限にします[1]。第2子以降の保育料は無料にします[1]。",
        citations=[Citation(n=1, doc_id="childcare-2027")],
        docs=[CHILDCARE],
        methods={"retriever": "bm25", "generator": "extractive"},
    )
    fields.update(kw)
    return AnswerV1(**fields)


def test_supported_verified_answer_is_fully_faithful() -> None:
    ev = evaluate(answer())
    assert ev.faithfulness.value == 1.0
    assert (ev.faithfulness.numerator, ev.faithfulness.denominator) == (2, 2)
    assert ev.faithfulness.reason is None


def test_evaluation_carries_the_answer_identity() -> None:
    a = answer()
    ev = evaluate(a)
    assert ev.comment_id == "c1" and ev.stream_id == "s1"
    assert ev.answer_message_id == a.message_id
    assert ev.question == "保育料っていくらになるの"
    assert ev.evidence_ids == ["childcare-2027"]
    assert ev.method == "lexical"
    assert ev.methods == {"retriever": "bm25", "generator": "extractive"}


def test_an_unsupported_claim_lowers_faithfulness() -> None:
    ev = evaluate(answer(answer="0〜2歳児の保育料は月額1万5千円を上限にします[1]。保育料は月額3万円に上がります[1]。"))
    assert ev.faithfulness.value == 0.5
    assert (ev.faithfulness.numerator, ev.faithfulness.denominator) == (1, 2)


def test_answer_relevancy_counts_the_question_words_addressed() -> None:
    ev = evaluate(answer())
    assert ev.answer_relevancy.value == 1.0
    off = evaluate(
        answer(
            answer="コミュニティバスの運賃を大人1回150円にします[1]。",
            docs=[BUS],
            citations=[Citation(n=1, doc_id="bus-fare-2027")],
        )
    )
    assert off.answer_relevancy.value == 0.0
    assert off.answer_relevancy.denominator and off.answer_relevancy.denominator > 0


def test_context_precision_is_none_without_documents() -> None:
    ev = evaluate(answer(docs=[], citations=[]))
    assert ev.context_precision is None  # no context: not judged, and not 0
    assert ev.evidence_ids == []


def test_context_precision_weights_by_rank() -> None:
    first = evaluate(answer(docs=[CHILDCARE, BUS]))
    assert first.context_precision is not None and first.context_precision.value == 1.0
    second = evaluate(answer(docs=[BUS, CHILDCARE]))  # the cited document is at rank 2 of 2
    assert second.context_precision is not None
    assert second.context_precision.value == pytest.approx(0.5)
    assert second.context_precision.numerator == pytest.approx(0.5)
    assert second.context_precision.denominator == 1


def test_unanswered_outcome_is_not_judged() -> None:
    ev = evaluate(answer(outcome="unanswered", answer=None, citations=[], docs=[]))
    assert ev.faithfulness.value is None
    assert ev.faithfulness.reason and "unanswered" in ev.faithfulness.reason
    assert ev.answer_relevancy.value is None and ev.answer_relevancy.reason
    assert ev.context_precision is None


def test_rejected_outcome_with_documents_has_unknown_precision_not_zero() -> None:
    ev = evaluate(answer(outcome="rejected", answer=None, citations=[]))
    assert ev.faithfulness.value is None
    assert ev.context_precision is not None
    assert ev.context_precision.value is None and ev.context_precision.reason


def test_verified_answer_without_context_has_no_faithfulness_value() -> None:
    ev = evaluate(answer(docs=[]))
    assert ev.faithfulness.value is None
    assert ev.faithfulness.reason == "no retrieved context"


# --- per-answer judgements (seed rules: cited, supported, timely, relevant, complete) ---------

from datetime import UTC, date, datetime  # noqa: E402

FARE_2025 = Evidence(
    doc_id="bus-fare-2025",
    chunk_id="bus-2025#a",
    text="2025年のコミュニティバスの運賃は大人1回200円でした。",
    lang="ja",
    valid_from=date(2025, 1, 1),
    valid_to=date(2025, 12, 31),
)
FARE_2027 = Evidence(
    doc_id="bus-fare-2027",
    chunk_id="bus-2027#a",
    text="コミュニティバスの運賃は大人1回150円です。",
    lang="ja",
    valid_from=date(2026, 11, 1),
    valid_to=None,
)


def fare_answer(text: str, doc: Evidence, *, at: datetime = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)) -> AnswerV1:
    question = "コミュニティバスの運賃は大人1回いくら？"
    c = CommentV1(comment_id="c2", stream_id="s1", author="viewer", text=question, normalized=question, published_at=at)
    return answer(comment=c, answer=text, docs=[doc], citations=[Citation(n=1, doc_id=doc.doc_id)])


def test_a_past_fact_correctly_quoted_is_not_timely_or_relevant_for_a_current_question() -> None:
    ev = evaluate(fare_answer("2025年のコミュニティバスの運賃は大人1回200円でした[1]。", FARE_2025))
    j = ev.judgement
    assert j is not None
    assert j.cited.value is True
    assert j.supported.value is True  # the claim says what its evidence says…
    assert j.timely.value is False and "2025-12-31" in (j.timely.reason or "")
    assert j.relevant.value is False  # …but does not answer for 1 November 2026
    assert j.complete.value is False


def test_the_current_fact_is_timely_and_relevant() -> None:
    ev = evaluate(fare_answer("コミュニティバスの運賃は大人1回150円です[1]。", FARE_2027))
    j = ev.judgement
    assert j is not None
    assert (j.cited.value, j.supported.value, j.timely.value, j.relevant.value) == (True, True, True, True)
    assert j.complete.value is None and j.complete.reason  # offline cannot tell without expected facts


def test_one_unsupported_claim_makes_the_answer_unsupported() -> None:
    ev = evaluate(answer(answer="0〜2歳児の保育料は月額1万5千円を上限にします[1]。保育料は月額3万円に上がります[1]。"))
    assert [c.supported for c in ev.claims] == [True, False]
    assert ev.judgement is not None and ev.judgement.supported.value is False
    assert "3" in (ev.claims[1].reason or "")


def test_an_uncited_answer_is_not_cited() -> None:
    ev = evaluate(answer(citations=[], answer="0〜2歳児の保育料は月額1万5千円を上限にします。"))
    assert ev.judgement is not None and ev.judgement.cited.value is False


def test_a_claim_citing_only_an_faq_entry_is_unknown_not_unsupported() -> None:
    ev = evaluate(answer(answer="保育料は無料です[2]。", citations=[Citation(n=2, doc_id="faq-fee")]))
    assert [c.supported for c in ev.claims] == [None]
    assert ev.judgement is not None and ev.judgement.supported.value is None
    assert ev.faithfulness.value is None and ev.faithfulness.reason


def test_every_metric_names_its_method_and_the_record_its_mode() -> None:
    ev = evaluate(answer())
    assert ev.mode == "offline"
    assert {ev.faithfulness.method, ev.answer_relevancy.method, ev.context_precision.method} == {"lexical"}


def test_a_comment_from_kotae_eval_carries_its_set_version() -> None:
    c = comment().model_copy(update={"source": "eval:sample-1"})
    assert evaluate(answer(comment=c)).set_version == "sample-1"
    assert evaluate(answer()).set_version is None
