"""kotae.services.evaluator.report: aggregate tables that never pool what differs."""

from __future__ import annotations

import json
import re
from datetime import UTC

from kotae.contracts import EvaluationV1, MetricScore
from kotae.services.evaluator.report import rates_over_time, render_report, summarize, write_png

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


def test_different_streams_are_never_pooled() -> None:
    rows = summarize([ev(stream="s1"), ev(stream="s2"), ev(stream="s1")])
    assert [(r["group"]["stream_id"], r["attempts"]) for r in rows] == [("s1", 2), ("s2", 1)]


def test_different_models_and_judges_are_never_pooled() -> None:
    rows = summarize(
        [
            ev(),
            ev().model_copy(update={"answer_models": {"generator": "openai:gpt-4.1-mini"}}),
            ev().model_copy(
                update={
                    "model": "openai:gpt-4.1",
                    "mode": "model",
                    "prompt_versions": {"faithfulness": "faithfulness.v1"},
                }
            ),
            ev(),
        ]
    )
    assert len(rows) == 3
    assert sorted(r["attempts"] for r in rows) == [1, 1, 2]
    assert {r["group"]["mode"] for r in rows} == {"offline", "model"}
    assert {r["group"]["model"] for r in rows} == {"-", "generator=openai:gpt-4.1-mini", "judge=openai:gpt-4.1"}
    assert all(r["group"]["stream_id"] == "s1" for r in rows)


def test_stage_models_order_does_not_split_a_group() -> None:
    a = ev().model_copy(update={"answer_models": {"reranker": "openai:a", "generator": "openai:b"}})
    b = ev().model_copy(update={"answer_models": {"generator": "openai:b", "reranker": "openai:a"}})
    rows = summarize([a, b])
    assert len(rows) == 1 and rows[0]["attempts"] == 2


def test_rates_pool_numerators_and_denominators() -> None:
    rows = summarize(
        [
            ev(faith=MetricScore(value=1.0, numerator=2, denominator=2)),
            ev(faith=MetricScore(value=0.5, numerator=1, denominator=2)),
        ]
    )
    faith = rows[0]["metrics"]["faithfulness"]
    assert (faith["numerator"], faith["denominator"]) == (3, 4)
    assert faith["rate"] == 0.75


def test_unknown_metrics_are_counted_as_unknown_not_as_zero() -> None:
    rows = summarize(
        [
            ev(faith=MetricScore(value=1.0, numerator=2, denominator=2)),
            ev(outcome="unanswered", faith=UNKNOWN, rel=UNKNOWN),
            ev(outcome="rejected", faith=UNKNOWN, rel=UNKNOWN),
        ]
    )
    faith = rows[0]["metrics"]["faithfulness"]
    assert faith["denominator"] == 2 and faith["unknown"] == 2
    assert (faith["numerator"], faith["denominator"]) == (2, 2)
    assert faith["rate"] == 1.0  # the two unknowns did not drag it to 0.33
    assert rows[0]["outcomes"] == {"verified": 1, "unanswered": 1, "rejected": 1}


def test_only_unknown_metrics_give_no_rate() -> None:
    rows = summarize([ev(outcome="unanswered", faith=UNKNOWN, rel=UNKNOWN)])
    assert rows[0]["metrics"]["faithfulness"]["rate"] is None
    assert rows[0]["metrics"]["faithfulness"]["unknown"] == 1


def test_omitted_context_precision_is_counted_apart() -> None:
    rows = summarize([ev(cp=None), ev(cp=MetricScore(value=0.5, numerator=0.5, denominator=1))])
    cp = rows[0]["metrics"]["context_precision"]
    assert (cp["denominator"], cp["unknown"], cp["omitted"]) == (1, 0, 1)
    assert cp["rate"] == 0.5


def test_failed_evaluations_are_counted() -> None:
    rows = summarize([ev(status="failed", faith=UNKNOWN, rel=UNKNOWN), ev()])
    assert (rows[0]["attempts"], rows[0]["completed"], rows[0]["failed"]) == (2, 1, 1)
    assert rows[0]["metrics"]["faithfulness"]["unknown"] == 0  # a failed job is not an unknown judgement


def test_rendered_report_shows_rate_numerator_denominator_and_unknowns() -> None:
    text = render_report(
        [
            ev(faith=MetricScore(value=1.0, numerator=2, denominator=2)),
            ev(faith=MetricScore(value=0.5, numerator=1, denominator=2)),
            ev(outcome="unanswered", faith=UNKNOWN, rel=UNKNOWN),
            ev(stream="s2"),
        ]
    )
    assert "kb:? · stream s1 · offline · model - · prompts -" in text
    assert "kb:? · stream s2 · offline" in text
    assert re.search(r"faithfulness\s+3/4\s+0\.750\s+1\s+0", text), text
    assert re.search(r"context_precision\s+0/0\s+—\s+0\s+3", text), text
    assert "attempts 3  completed 3  failed 0  cached 0;  outcomes unanswered 1, verified 2" in text


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
        comment_id="c",
        stream_id="s1",
        comment=comment,
        outcome="verified",
        answer="保育料は無料にします[1]。",
        citations=[Citation(n=1, doc_id="childcare")],
        docs=[doc],
    )
    cited_faq_only = cited_doc.model_copy(
        update={"answer": "保育料は無料です[2]。", "citations": [Citation(n=2, doc_id="faq-fee")]}
    )
    evaluations = [evaluate(cited_doc), evaluate(cited_faq_only)]
    assert [e.context_precision.value for e in evaluations] == [1.0, 0.0]
    cp = summarize(evaluations)[0]["metrics"]["context_precision"]
    assert cp["denominator"] == 2
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
    rel = rows[0]["metrics"]["answer_relevancy"]
    assert (rel["denominator"], rel["unknown"]) == (2, 1)
    assert (rel["numerator"], rel["denominator"]) == (1.25, 2)
    assert rel["rate"] == 0.625


def test_judgements_are_shown_with_their_counts() -> None:
    from kotae.contracts.v1 import AnswerJudgement, Judged

    yes, no = Judged(value=True, reason="r"), Judged(value=False, reason="r")
    text = render_report([ev().model_copy(update={"judgement": AnswerJudgement(cited=yes, timely=no)})])
    assert re.search(r"cited\s+1/1\s+1\.000\s+0", text), text
    assert re.search(r"timely\s+0/1\s+0\.000\s+0", text), text
    assert re.search(r"complete\s+0/0\s+—\s+1", text), text  # unknown: counted apart, no rate


def test_rates_over_time_and_the_png_chart(tmp_path) -> None:
    from datetime import datetime, timedelta

    t0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    evaluations = [
        ev(faith=MetricScore(value=1.0, numerator=2, denominator=2)).model_copy(update={"created_at": t0}),
        ev(faith=MetricScore(value=0.0, numerator=0, denominator=2)).model_copy(
            update={"created_at": t0 + timedelta(hours=3)}
        ),
    ]
    [series] = rates_over_time(evaluations)
    assert [p["metrics"]["faithfulness"]["rate"] for p in series["points"]] == [1.0, 0.0]
    png = write_png(evaluations, tmp_path / "rates.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
