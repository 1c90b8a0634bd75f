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

A metric that cannot be judged is ``None`` with its reason; nothing unknown is
counted as a failure or a success.
"""

from __future__ import annotations

from kotae.citations import strip_markers
from kotae.contracts import AnswerV1, EvaluationV1, MetricScore
from kotae.grounding import support
from kotae.knowledge.text import search_tokens, split_sentences

METHOD = "lexical"


def faithfulness(answer: AnswerV1) -> MetricScore:
    if answer.outcome != "verified" or not answer.answer:
        return MetricScore(reason=f"no claims to judge ({answer.outcome})")
    context = [d.text for d in answer.docs]
    if not context:
        return MetricScore(reason="no retrieved context")
    claims = [strip_markers(s) for s in split_sentences(answer.answer)]
    claims = [c for c in claims if search_tokens(c)]
    if not claims:
        return MetricScore(reason="the answer makes no claim")
    supported = sum(1 for c in claims if support(c, context).supported)
    return MetricScore(value=supported / len(claims), numerator=supported, denominator=len(claims))


def answer_relevancy(answer: AnswerV1) -> MetricScore:
    if answer.outcome != "verified" or not answer.answer:
        return MetricScore(reason=f"no answer to judge ({answer.outcome})")
    question = set(search_tokens(answer.comment.normalized))
    if not question:
        return MetricScore(reason="the question has no content words")
    said = set(search_tokens(strip_markers(answer.answer)))
    hit = len(question & said)
    return MetricScore(value=hit / len(question), numerator=hit, denominator=len(question))


def context_precision(answer: AnswerV1) -> MetricScore | None:
    if not answer.docs:
        return None
    if answer.outcome != "verified":
        return MetricScore(reason=f"relevance unknown without a verified answer ({answer.outcome})")
    cited = {c.doc_id for c in answer.citations}
    relevant_so_far = 0
    total = 0.0
    for k, doc in enumerate(answer.docs, 1):
        if doc.doc_id in cited:
            relevant_so_far += 1
            total += relevant_so_far / k
    if relevant_so_far == 0:
        return MetricScore(value=0.0, numerator=0, denominator=0, reason="no retrieved document was cited")
    return MetricScore(value=total / relevant_so_far, numerator=round(total, 6), denominator=relevant_so_far)


def evaluate(answer: AnswerV1) -> EvaluationV1:
    """Score one answer with the offline method."""
    return EvaluationV1(
        comment_id=answer.comment_id,
        stream_id=answer.stream_id,
        answer_message_id=answer.message_id,
        outcome=answer.outcome,
        question=answer.comment.text,
        answer=answer.answer,
        evidence_ids=[d.doc_id for d in answer.docs],
        faithfulness=faithfulness(answer),
        answer_relevancy=answer_relevancy(answer),
        context_precision=context_precision(answer),
        method=METHOD,
        methods=answer.methods,
    )
