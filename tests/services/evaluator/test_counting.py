"""kotae.services.evaluator.counting: the report's counting rules.

The cases mirror a worked fixture of four attempts at one question (is the
library open on Sunday 1 November 2026, a first Sunday when it is closed):
three completed, one failed with HTTP 429; of the completed, one answer is
partly unsupported, one quotes a 2025 fact correctly, one could not be judged.
"""

from __future__ import annotations

import pytest

from kotae.contracts import EvaluationV1, MetricScore
from kotae.contracts.v1 import AnswerJudgement, ClaimJudgement, Judged
from kotae.services.evaluator.counting import InvalidCount, ratio, summarize
from kotae.services.evaluator.logic import SummaryMismatch

T, F, U = True, False, None


def judged(**values: bool | None) -> AnswerJudgement:
    return AnswerJudgement(**{k: Judged(value=v, reason=f"{k} reason") for k, v in values.items()})


def attempt(**kw: object) -> EvaluationV1:
    fields: dict[str, object] = dict(
        comment_id="sunday-hours",
        stream_id="fixture-assistant",
        answer_message_id="m",
        outcome="verified",
        question="2026年11月1日の日曜日に架空図書館を利用できますか。",
        answer="…",
        faithfulness=MetricScore(value=1.0, numerator=1, denominator=1),
        answer_relevancy=MetricScore(value=1.0, numerator=1, denominator=1),
        method="lexical",
        mode="offline",
        set_version="2",
    )
    fields.update(kw)
    return EvaluationV1(**fields)  # type: ignore[arg-type]


CLAIMS_A = [
    ClaimJudgement(text="通常の日曜開館時間は10〜17時", supported=True, reason="通常時間に限定した主張は一致"),
    ClaimJudgement(text="11月1日も利用可能", supported=False, reason="2026-11-01は第一日曜"),
]
ANSWER_A = attempt(
    answer="日曜日は10〜17時です。11月1日も利用できます。",
    judgement=judged(cited=T, supported=F, timely=T, relevant=T, complete=F),
    claims=CLAIMS_A,
    faithfulness=MetricScore(value=0.5, numerator=1, denominator=2),
)
ANSWER_B = attempt(
    answer="2025年の日曜日は11〜16時でした。",
    judgement=judged(cited=T, supported=T, timely=F, relevant=F, complete=F),
    claims=[ClaimJudgement(text="2025年の日曜11〜16時開館", supported=True, reason="文と出典の両方が2025年に限定")],
)
ANSWER_C = attempt(
    answer="保存中に応答が切れました。",
    judgement=judged(cited=U, supported=U, timely=U, relevant=U, complete=U),
    claims=[ClaimJudgement(text="未確認", supported=None, reason="原文が不完全")],
    faithfulness=MetricScore(reason="原文が不完全"),
    answer_relevancy=MetricScore(reason="原文が不完全"),
)
FAILED = attempt(
    answer=None,
    status="failed",
    error="HTTP 429",
    faithfulness=MetricScore(reason="evaluation failed: HTTP 429"),
    answer_relevancy=MetricScore(reason="evaluation failed: HTTP 429"),
)
EXAMPLES = [ANSWER_A, ANSWER_B, ANSWER_C, FAILED]


def test_a_zero_denominator_gives_no_rate_and_invalid_counts_are_refused() -> None:
    assert ratio(0, 0).rate is None
    assert ratio(0, 0).text() == "0/0 (—)"
    for numerator, denominator in [(2, 1), (-1, 1), (0.5, 1), (1, 1.5), (True, 1)]:
        with pytest.raises(InvalidCount):
            ratio(numerator, denominator)
    assert ratio(0.5, 1, whole=False).rate == 0.5  # a sum of per-answer scores may be fractional


def test_failed_and_unknown_attempts_are_kept_out_of_their_denominators() -> None:
    [row] = summarize(EXAMPLES)
    assert (row["attempts"], row["completed"], row["failed"]) == (4, 3, 1)
    supported = row["metrics"]["supported"]
    assert (supported["numerator"], supported["denominator"], supported["rate"], supported["unknown"]) == (1, 2, 0.5, 1)
    assert row["metrics"]["complete"]["numerator"] == 0
    assert row["metrics"]["complete"]["denominator"] == 2
    faith = row["metrics"]["faithfulness"]
    assert (faith["numerator"], faith["denominator"], faith["unknown"]) == (2, 3, 1)  # the failed attempt is in none


def test_a_past_fact_correctly_quoted_is_supported_but_not_timely_or_relevant() -> None:
    [row] = summarize([ANSWER_B])
    m = row["metrics"]
    assert m["supported"]["rate"] == 1
    assert m["timely"]["rate"] == 0 and m["relevant"]["rate"] == 0 and m["complete"]["rate"] == 0


def test_a_summary_that_disagrees_with_its_claims_is_refused() -> None:
    claimed_supported = ANSWER_A.model_copy(
        update={"judgement": judged(cited=T, supported=T, timely=T, relevant=T, complete=F)}
    )
    with pytest.raises(SummaryMismatch, match="summary mismatch"):
        summarize([claimed_supported])
    unknown_as_true = ANSWER_C.model_copy(
        update={"judgement": judged(cited=U, supported=T, timely=U, relevant=U, complete=U)}
    )
    with pytest.raises(SummaryMismatch):
        summarize([unknown_as_true])


def test_rows_that_differ_in_version_stream_mode_or_model_are_never_pooled() -> None:
    rows = [
        ANSWER_A,
        ANSWER_A.model_copy(update={"set_version": "3"}),
        ANSWER_A.model_copy(update={"stream_id": "another"}),
        ANSWER_A.model_copy(update={"mode": "model"}),
        ANSWER_A.model_copy(update={"model": "openai:model-b"}),
        ANSWER_A.model_copy(update={"prompt_versions": {"faithfulness": "faithfulness.v2"}}),
        ANSWER_A.model_copy(update={"answer_models": {"generator": "openai:model-c"}}),
        ANSWER_A.model_copy(update={"set_version": None, "kb": "default"}),
    ]
    groups = summarize(rows)
    assert len(groups) == 8
    assert all(g["attempts"] == 1 for g in groups)


def test_same_group_is_counted_together() -> None:
    [row] = summarize([ANSWER_A, ANSWER_A.model_copy(update={"message_id": "other"})])
    assert row["attempts"] == 2
    assert row["metrics"]["cited"]["numerator"] == 2


def test_how_far_a_comment_went_does_not_split_its_group() -> None:
    dropped = ANSWER_C.model_copy(update={"outcome": "dropped", "methods": {"ingest": "question_rules"}})
    answered = ANSWER_A.model_copy(update={"methods": {"retriever": "hybrid", "generator": "extractive"}})
    [row] = summarize([dropped, answered])
    assert row["outcomes"] == {"dropped": 1, "verified": 1}
    assert row["group"]["mode"] == "offline" and row["group"]["model"] == "-"
