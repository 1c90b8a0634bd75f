"""What the evaluator does: score every answer, off the hot path.

Metrics follow RAGAS's definitions; this module holds the offline method,
``lexical``, which judges by content words instead of a model:

* faithfulness — claims (sentences) of the answer supported by the retrieved
  context ÷ claims;
* answer relevancy — share of the question's content words that the answer
  addresses;
* context precision — rank-weighted precision of the retrieved documents,
  taking a document as relevant when the answer's claims rest on it (it is
  cited); ``None`` (not zero) when there was no context.

Beside the scores, each answer gets the per-answer judgements a report counts
(:class:`AnswerJudgement`): cited, supported, timely, relevant and complete,
each true, false or None (could not be decided) with its reason.

A metric that cannot be judged is ``None`` with its reason; nothing unknown is
counted as a failure or a success.
"""

from __future__ import annotations

from datetime import date

from kotae.citations import cited_numbers, strip_markers
from kotae.contracts import AnswerV1, EvaluationV1, Evidence, MetricScore, ModelCall
from kotae.contracts.v1 import AnswerJudgement, ClaimJudgement, Judged
from kotae.language.grounding import support
from kotae.language.text import search_tokens, split_sentences

METHOD = "lexical"
#: Share of the question's content words an answer must address to count as relevant (offline).
RELEVANT_AT = 0.5
#: Prefix of CommentV1.source for comments that ``kotae eval`` sent; the rest is the set version.
EVAL_SOURCE = "eval:"


class SummaryMismatch(ValueError):
    """An answer-level ``supported`` that disagrees with the claims it summarises."""


# --- claims -------------------------------------------------------------------------


def summarize_claims(claims: list[ClaimJudgement]) -> Judged:
    """``supported`` of a whole answer: false if any claim is unsupported, None while any is unknown.

    Example::

        >>> summarize_claims([ClaimJudgement(text="a", supported=True), ClaimJudgement(text="b", supported=False)]).value
        False
    """
    if not claims:
        return Judged(reason="the answer makes no claim")
    unsupported = [c for c in claims if c.supported is False]
    if unsupported:
        return Judged(
            value=False, reason=f"{len(unsupported)} of {len(claims)} claims unsupported: {unsupported[0].text[:80]!r}"
        )
    unknown = [c for c in claims if c.supported is None]
    if unknown:
        return Judged(
            reason=f"{len(unknown)} of {len(claims)} claims could not be judged: {unknown[0].reason or 'no reason'}"
        )
    return Judged(value=True, reason=f"all {len(claims)} claims supported")


def check_summary(supported: Judged, claims: list[ClaimJudgement], *, where: str = "evaluation") -> None:
    """Refuse an answer-level ``supported`` that its claims do not give (e.g. true with one claim unsupported)."""
    if not claims:
        return
    expected = summarize_claims(claims).value
    if supported.value is not expected:
        raise SummaryMismatch(
            f"{where}: summary mismatch: supported={supported.value} but its claims give {expected} "
            f"({sum(c.supported is True for c in claims)} supported, {sum(c.supported is False for c in claims)} unsupported, "
            f"{sum(c.supported is None for c in claims)} unknown)"
        )


def _cited_docs(sentence: str, answer: AnswerV1) -> tuple[list[Evidence], list[str]]:
    """Evidence a sentence cites, and cited ids whose text the answer does not carry (FAQ entries)."""
    by_n = {c.n: c.doc_id for c in answer.citations}
    by_id = {d.doc_id: d for d in answer.docs}
    docs: list[Evidence] = []
    missing: list[str] = []
    for n in cited_numbers(sentence):
        doc_id = by_n.get(n)
        if doc_id is None:
            missing.append(f"[{n}]")
        elif doc_id in by_id:
            if by_id[doc_id] not in docs:
                docs.append(by_id[doc_id])
        else:
            missing.append(doc_id)
    return docs, missing


def lexical_claims(answer: AnswerV1) -> list[ClaimJudgement]:
    """The answer's claims (sentences with content words), each checked against the context it cites.

    A claim without markers is checked against the whole retrieved context (as
    RAGAS does); a claim that cites only evidence the answer does not carry
    (an FAQ entry) cannot be checked here and stays unknown.
    """
    claims = []
    for sentence in split_sentences(answer.answer or ""):
        text = strip_markers(sentence).strip()
        if not search_tokens(text):
            continue
        cited, missing = _cited_docs(sentence, answer)
        if not cited and missing:
            claims.append(
                ClaimJudgement(
                    text=text,
                    evidence_ids=missing,
                    reason=f"cites {', '.join(missing)}, whose text the answer does not carry",
                )
            )
            continue
        context = cited or list(answer.docs)
        s = support(text, [d.text for d in context])
        ids = [d.doc_id for d in context]
        if s.supported:
            reason = "every number and ≥80% of its content words are in the evidence"
        elif s.missing_numbers:
            reason = f"numbers not in the evidence: {', '.join(s.missing_numbers[:5])}"
        else:
            reason = f"{s.ratio:.0%} of its content words in the evidence; missing: {', '.join(s.missing_terms[:5])}"
        claims.append(ClaimJudgement(text=text, supported=s.supported, evidence_ids=ids, reason=reason))
    return claims


# --- RAGAS metrics (offline) ------------------------------------------------------------


def _has_answer(answer: AnswerV1) -> bool:
    return answer.outcome == "verified" and bool(answer.answer)


def faithfulness_from_claims(claims: list[ClaimJudgement], method: str) -> MetricScore:
    """Supported claims ÷ judged claims; None when no claim could be judged."""
    judged = [c for c in claims if c.supported is not None]
    if not claims:
        return MetricScore(reason="the answer makes no claim", method=method)
    if not judged:
        return MetricScore(reason=f"none of {len(claims)} claims could be judged: {claims[0].reason}", method=method)
    ok = sum(1 for c in judged if c.supported)
    unknown = len(claims) - len(judged)
    return MetricScore(
        value=ok / len(judged),
        numerator=ok,
        denominator=len(judged),
        reason=f"{unknown} claim(s) could not be judged and are left out" if unknown else None,
        method=method,
    )


def faithfulness(answer: AnswerV1, claims: list[ClaimJudgement] | None = None) -> MetricScore:
    if not _has_answer(answer):
        return MetricScore(reason=f"no claims to judge ({answer.outcome})", method=METHOD)
    if not answer.docs:
        return MetricScore(reason="no retrieved context", method=METHOD)
    return faithfulness_from_claims(lexical_claims(answer) if claims is None else claims, METHOD)


def answer_relevancy(answer: AnswerV1) -> MetricScore:
    if not _has_answer(answer):
        return MetricScore(reason=f"no answer to judge ({answer.outcome})", method=METHOD)
    question = set(search_tokens(answer.comment.normalized))
    if not question:
        return MetricScore(reason="the question has no content words", method=METHOD)
    said = set(search_tokens(strip_markers(answer.answer or "")))
    hit = len(question & said)
    return MetricScore(value=hit / len(question), numerator=hit, denominator=len(question), method=METHOD)


def rank_weighted_precision(relevant: list[bool], method: str) -> MetricScore:
    """RAGAS context precision: mean of precision@k over the ranks k that hold a relevant document."""
    hits = 0
    total = 0.0
    for k, rel in enumerate(relevant, 1):
        if rel:
            hits += 1
            total += hits / k
    if hits == 0:
        return MetricScore(
            value=0.0, numerator=0, denominator=0, reason="no retrieved document was relevant", method=method
        )
    return MetricScore(value=total / hits, numerator=round(total, 6), denominator=hits, method=method)


def context_precision(answer: AnswerV1) -> MetricScore | None:
    if not answer.docs:
        return None
    if answer.outcome != "verified":
        return MetricScore(reason=f"relevance unknown without a verified answer ({answer.outcome})", method=METHOD)
    cited = {c.doc_id for c in answer.citations}
    return rank_weighted_precision([d.doc_id in cited for d in answer.docs], METHOD)


# --- per-answer judgements --------------------------------------------------------------


def question_date(answer: AnswerV1) -> date:
    """The date the question is about: the day the viewer posted it (UTC)."""
    return answer.comment.published_at.date()


def valid_on(doc: Evidence, day: date) -> bool:
    return (doc.valid_from is None or doc.valid_from <= day) and (doc.valid_to is None or day <= doc.valid_to)


def _span(doc: Evidence) -> str:
    return f"{doc.valid_from or '…'}–{doc.valid_to or '…'}"


def judge_cited(answer: AnswerV1) -> Judged:
    if not _has_answer(answer):
        return Judged(reason=f"no answer to judge ({answer.outcome})")
    if not answer.citations:
        return Judged(value=False, reason="the answer cites nothing")
    ids = sorted({c.doc_id for c in answer.citations})
    return Judged(value=True, reason=f"cites {', '.join(ids)}")


def evidence_used(answer: AnswerV1) -> list[Evidence]:
    """The documents the answer stands on: the cited ones, or every retrieved one when it cites none."""
    cited = {c.doc_id for c in answer.citations}
    used = [d for d in answer.docs if d.doc_id in cited]
    return used or list(answer.docs)


def judge_timely(answer: AnswerV1) -> Judged:
    """True when every document the answer stands on was valid on the question's date."""
    if not _has_answer(answer):
        return Judged(reason=f"no answer to judge ({answer.outcome})")
    used = evidence_used(answer)
    if not used:
        return Judged(reason="no evidence carried with the answer")
    day = question_date(answer)
    stale = [d for d in used if not valid_on(d, day)]
    if stale:
        d = stale[0]
        return Judged(value=False, reason=f"{d.doc_id} is valid {_span(d)}, not on the question's date {day}")
    return Judged(value=True, reason=f"every cited document valid on {day}")


def judge_relevant(answer: AnswerV1, relevancy: MetricScore, timely: Judged) -> Judged:
    """Relevant: about the question's subject and about its time; a past fact does not answer a current question."""
    if not _has_answer(answer):
        return Judged(reason=f"no answer to judge ({answer.outcome})")
    if timely.value is False:
        return Judged(value=False, reason=f"answers for another period: {timely.reason}")
    if relevancy.value is None:
        return Judged(reason=relevancy.reason or "relevancy unknown")
    if relevancy.value >= RELEVANT_AT:
        return Judged(value=True, reason=f"addresses {relevancy.value:.0%} of the question's content words")
    return Judged(value=False, reason=f"addresses only {relevancy.value:.0%} of the question's content words")


def judge_complete(answer: AnswerV1, timely: Judged, relevant: Judged) -> Judged:
    """Offline, completeness is decided only when it plainly fails; otherwise it needs expected facts or a model."""
    if not _has_answer(answer):
        return Judged(reason=f"no answer to judge ({answer.outcome})")
    if timely.value is False:
        return Judged(value=False, reason="no answer for the question's date")
    if relevant.value is False:
        return Judged(value=False, reason="the question is not addressed")
    return Judged(reason="offline: completeness needs expected facts or a model judge")


def offline_judgement(answer: AnswerV1, claims: list[ClaimJudgement], relevancy: MetricScore) -> AnswerJudgement:
    supported = (
        summarize_claims(claims) if _has_answer(answer) else Judged(reason=f"no answer to judge ({answer.outcome})")
    )
    if _has_answer(answer) and not answer.docs:
        supported = Judged(reason="no retrieved context")
    timely = judge_timely(answer)
    relevant = judge_relevant(answer, relevancy, timely)
    return AnswerJudgement(
        cited=judge_cited(answer),
        supported=supported,
        timely=timely,
        relevant=relevant,
        complete=judge_complete(answer, timely, relevant),
    )


# --- the evaluation record ----------------------------------------------------------------


def set_version_of(answer: AnswerV1) -> str | None:
    source = answer.comment.source
    return source[len(EVAL_SOURCE) :] or None if source.startswith(EVAL_SOURCE) else None


def _first_calls(answer: AnswerV1) -> list[ModelCall]:
    return list(answer.cached_from.model_calls) if answer.cached_from else []


def record(answer: AnswerV1, **fields: object) -> EvaluationV1:
    """An evaluation of ``answer`` carrying everything an audit needs, plus ``fields``."""
    base: dict[str, object] = dict(
        comment_id=answer.comment_id,
        stream_id=answer.stream_id,
        answer_message_id=answer.message_id,
        outcome=answer.outcome,
        question=answer.comment.text,
        answer=answer.answer,
        evidence_ids=[d.doc_id for d in answer.docs],
        methods=answer.methods,
        viewer_comment=answer.comment,
        answer_outcome_reason=answer.reason,
        kb=answer.comment.kb,
        evidence_versions={d.doc_id: d.version for d in answer.docs if d.version},
        set_version=set_version_of(answer),
        # A cached answer cost no call of its own; it was made by the original's models, and is counted with them.
        answer_models={c.stage: c.model for c in (*_first_calls(answer), *answer.model_calls)},
        cached_from=answer.cached_from.comment_id if answer.cached_from else None,
    )
    base.update(fields)
    return EvaluationV1(**base)  # type: ignore[arg-type]


def evaluate(answer: AnswerV1) -> EvaluationV1:
    """Score one answer with the offline method."""
    claims = lexical_claims(answer) if _has_answer(answer) and answer.docs else []
    relevancy = answer_relevancy(answer)
    judgement = offline_judgement(answer, claims, relevancy)
    check_summary(judgement.supported, claims, where=answer.comment_id)
    return record(
        answer,
        faithfulness=faithfulness(answer, claims),
        answer_relevancy=relevancy,
        context_precision=context_precision(answer),
        method=METHOD,
        mode="offline",
        judgement=judgement,
        claims=claims,
    )


def failed_evaluation(
    answer: AnswerV1, error: str, *, method: str, model: str | None = None, mode: str = "offline"
) -> EvaluationV1:
    """An evaluation job that failed as a whole: recorded as failed, every metric unknown with the error."""
    unknown = MetricScore(reason=f"evaluation failed: {error[:300]}", method=method)
    return record(
        answer,
        faithfulness=unknown,
        answer_relevancy=unknown,
        context_precision=unknown if answer.docs else None,
        method=method,
        model=model,
        mode=mode,
        status="failed",
        error=error[:4000],
    )
