"""kotae.services.evaluator.report: aggregate tables that never pool what differs."""

from __future__ import annotations

import json
import re

from kotae.contracts import EvaluationV1, MetricScore
from kotae.services.evaluator.report import render_report, summarize

UNKNOWN = MetricScore(reason="no claims to judge (unanswered)")


def ev(
    *,
    stream: str = "s1",
    outcome: str = "verified",
    faith: MetricScore | None = None,
    rel: MetricScore | None = None,
    cp: MetricScore | None = None,
    method: str = "lexical",
    methods: dict[str, str] | None = None,
    status: str = "ok",
) -> EvaluationV1:
    return EvaluationV1(
        comment_id="c",
        stream_id=stream,
        answer_message_id="m",
        outcome=outcome,
        question="保育料は？",
        faithfulness=faith or MetricScore(value=1.0, numerator=2, denominator=2),
        answer_relevancy=rel or MetricScore(value=1.0, numerator=1, denominator=1),
        context_precision=cp,
        method=method,
        methods={"generator": "extractive"} if methods is None else methods,
        status=status,
    )


def by_stream(rows: list[dict]) -> dict[tuple[str, str], dict]:
    return {(r["stream_id"], r["methods"]): r for r in rows}


def test_different_streams_are_never_pooled() -> None:
    rows = summarize([ev(stream="s1"), ev(stream="s2"), ev(stream="s1")])
    assert [(r["stream_id"], r["answers"]) for r in rows] == [("s1", 2), ("s2", 1)]


def test_different_methods_are_never_pooled() -> None:
    rows = summarize(
        [
            ev(methods={"generator": "extractive"}),
            ev(methods={"generator": "llm"}),
            ev(method="llm_judge", methods={"generator": "extractive"}),
            ev(methods={"generator": "extractive"}),
        ]
    )
    assert len(rows) == 3
    assert sorted(r["answers"] for r in rows) == [1, 1, 2]
    assert len({r["methods"] for r in rows}) == 3
    assert all(r["stream_id"] == "s1" for r in rows)


def test_methods_order_does_not_split_a_group() -> None:
    rows = summarize([ev(methods={"a": "1", "b": "2"}), ev(methods={"b": "2", "a": "1"})])
    assert len(rows) == 1 and rows[0]["answers"] == 2


def test_rates_pool_numerators_and_denominators() -> None:
    rows = summarize(
        [
            ev(faith=MetricScore(value=1.0, numerator=2, denominator=2)),
            ev(faith=MetricScore(value=0.5, numerator=1, denominator=2)),
        ]
    )
    faith = rows[0]["faithfulness"]
    assert (faith["numerator"], faith["denominator"], faith["judged"]) == (3, 4, 2)
    assert faith["rate"] == 0.75


def test_unknown_metrics_are_counted_as_unknown_not_as_zero() -> None:
    rows = summarize(
        [
            ev(faith=MetricScore(value=1.0, numerator=2, denominator=2)),
            ev(outcome="unanswered", faith=UNKNOWN, rel=UNKNOWN),
            ev(outcome="rejected", faith=UNKNOWN, rel=UNKNOWN),
        ]
    )
    faith = rows[0]["faithfulness"]
    assert faith["judged"] == 1 and faith["unknown"] == 2
    assert (faith["numerator"], faith["denominator"]) == (2, 2)
    assert faith["rate"] == 1.0  # the two unknowns did not drag it to 0.33
    assert rows[0]["outcomes"] == {"verified": 1, "unanswered": 1, "rejected": 1}


def test_only_unknown_metrics_give_no_rate() -> None:
    rows = summarize([ev(outcome="unanswered", faith=UNKNOWN, rel=UNKNOWN)])
    assert rows[0]["faithfulness"]["rate"] is None
    assert rows[0]["faithfulness"]["unknown"] == 1


def test_omitted_context_precision_is_counted_apart() -> None:
    rows = summarize([ev(cp=None), ev(cp=MetricScore(value=0.5, numerator=0.5, denominator=1))])
    cp = rows[0]["context_precision"]
    assert (cp["judged"], cp["unknown"], cp["omitted"]) == (1, 0, 1)
    assert cp["rate"] == 0.5


def test_failed_evaluations_are_counted() -> None:
    rows = summarize([ev(status="failed", faith=UNKNOWN, rel=UNKNOWN), ev()])
    assert rows[0]["failed_evaluations"] == 1


def test_rendered_report_shows_rate_numerator_denominator_and_unknowns() -> None:
    text = render_report(
        [
            ev(faith=MetricScore(value=1.0, numerator=2, denominator=2)),
            ev(faith=MetricScore(value=0.5, numerator=1, denominator=2)),
            ev(outcome="unanswered", faith=UNKNOWN, rel=UNKNOWN),
            ev(stream="s2"),
        ]
    )
    assert "stream s1 · lexical|generator=extractive" in text
    assert "stream s2 · lexical|generator=extractive" in text
    assert re.search(r"faithfulness\s+0\.750\s+3/4\s+2\s+1\s+0", text), text
    assert re.search(r"context_precision\s+—\s+0/0\s+0\s+0\s+3", text), text
    assert "outcomes unanswered 1, verified 2" in text


def test_rendered_report_as_json_matches_summary() -> None:
    evaluations = [ev(), ev(stream="s2", outcome="unanswered", faith=UNKNOWN, rel=UNKNOWN)]
    assert json.loads(render_report(evaluations, as_json=True)) == summarize(evaluations)


def test_empty_report_says_so() -> None:
    assert "no evaluations yet" in render_report([])
    assert json.loads(render_report([], as_json=True)) == []


def test_pooled_context_precision_reflects_a_judged_zero() -> None:
    from kotae.contracts import AnswerV1, Citation, CommentV1, Evidence
    from kotae.services.evaluator.logic import evaluate

    comment = CommentV1(comment_id="c", stream_id="s1", author="a", text="保育料は？", normalized="保育料は?")
    doc = Evidence(doc_id="childcare", chunk_id="childcare#1", text="保育料は無料にします。", lang="ja")
    cited_doc = AnswerV1(
        comment_id="c", stream_id="s1", comment=comment, outcome="verified",
        answer="保育料は無料にします[1]。", citations=[Citation(n=1, doc_id="childcare")], docs=[doc],
    )
    cited_faq_only = cited_doc.model_copy(
        update={"answer": "保育料は無料です[2]。", "citations": [Citation(n=2, doc_id="faq-fee")]}
    )
    evaluations = [evaluate(cited_doc), evaluate(cited_faq_only)]
    assert [e.context_precision.value for e in evaluations] == [1.0, 0.0]
    cp = summarize(evaluations)[0]["context_precision"]
    assert cp["judged"] == 2
    assert cp["rate"] == 0.5  # one of two judged answers scored 0.0: it counts
    assert (cp["numerator"], cp["denominator"]) == (1.0, 2)


def test_per_answer_scores_are_pooled_as_their_mean() -> None:
    rows = summarize(
        [
            ev(rel=MetricScore(value=1.0, numerator=1, denominator=1)),
            ev(rel=MetricScore(value=0.25, numerator=1, denominator=4)),
            ev(outcome="unanswered", faith=UNKNOWN, rel=UNKNOWN),
        ]
    )
    rel = rows[0]["answer_relevancy"]
    assert (rel["judged"], rel["unknown"]) == (2, 1)
    assert (rel["numerator"], rel["denominator"]) == (1.25, 2)
    assert rel["rate"] == 0.625
