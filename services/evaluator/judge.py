"""The evaluator's model method: a chat model judges each metric through its own prompt.

RAGAS's definitions, with a model doing the reading (``KOTAE_EVALUATOR_MODEL``):

* faithfulness (``faithfulness.v1``) — the model splits the answer into claims
  and judges each against the context; supported claims ÷ judged claims;
* answer relevancy (``answer_relevancy.v1``) — the model writes the questions the
  answer answers; the score is their mean cosine similarity to the viewer's
  question under the configured embedding model (0 for an evasive answer); the
  same reply decides ``relevant`` and ``complete``;
* context precision (``context_precision.v2``) — the model marks each retrieved
  block useful or not; rank-weighted precision of those verdicts. (v2 insists on a
  verdict for every block and shows three: a 1.5B local model answered v1 with the
  first block only, 4 of 5 times.)

Timeliness is not a model's call: it comes from the evidence's validity dates.

A metric whose reply stays unusable after ``KOTAE_MODEL_REASK`` extra asks is
None with the reason — never a made-up score. A model that is unavailable is
retried through the bus (the answer is redelivered with backoff); on the last
delivery its metrics are None with the reason, and an evaluation none of whose
metrics could be judged is recorded as failed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kotae.contracts import AnswerV1, EvaluationV1, MetricScore, ModelCall
from kotae.contracts.v1 import AnswerJudgement, ClaimJudgement, Judged
from kotae.model_reply import again, as_bool, as_int, json_object
from kotae.prompts import load_prompt
from kotae.providers import BadReply, ChatModel, ModelUnavailable
from kotae.services.evaluator.logic import (
    check_summary,
    failed_evaluation,
    faithfulness_from_claims,
    judge_cited,
    judge_timely,
    question_date,
    rank_weighted_precision,
    record,
    summarize_claims,
)

METHOD = "model"
PROMPTS = Path(__file__).parent / "prompts"
PROMPT_VERSIONS = {
    "faithfulness": "faithfulness.v1",
    "answer_relevancy": "answer_relevancy.v1",
    "context_precision": "context_precision.v2",
}
MAX_BLOCK_CHARS = 2000


class Embeds:
    """What answer relevancy needs from an embedding model: unit vectors of texts."""

    def __init__(self, spec: str, api_key: str | None = None) -> None:
        self.spec = spec
        self.api_key = api_key

    def vectors(self, texts: list[str]) -> np.ndarray:
        from kotae.knowledge.embeddings import embedder_for

        return embedder_for(self.spec, api_key=self.api_key).embed(texts, "query")


@dataclass
class _Asked:
    """One metric's exchange with the model: the parsed reply, or why there is none."""

    value: Any = None
    problem: str | None = None
    unavailable: bool = False
    calls: list[ModelCall] = field(default_factory=list)


def render_context(answer: AnswerV1) -> str:
    day = question_date(answer)
    parts = [f"Question / 質問 (asked on {day}):", "<<<", answer.comment.text, ">>>", "", "Context / 資料:"]
    for n, d in enumerate(answer.docs, 1):
        valid = f"valid {d.valid_from or '…'} to {d.valid_to or '…'}"
        parts += ["", f"[{n}] {d.title} ({valid})".rstrip(), d.text[:MAX_BLOCK_CHARS]]
    if not answer.docs:
        parts.append("(none)")
    return "\n".join(parts)


def render_user(answer: AnswerV1) -> str:
    return "\n".join([render_context(answer), "", "Answer / 回答:", "<<<", answer.answer or "", ">>>"])


async def _ask(
    model: ChatModel, prompt_version: str, user: str, reask: int, read: Callable[[dict[str, Any]], Any]
) -> _Asked:
    """Ask until ``read`` accepts the reply (it raises :class:`BadReply` otherwise), at most ``1 + reask`` times."""
    asked = _Asked()
    system = load_prompt(PROMPTS, prompt_version)
    for _ in range(1 + reask):
        try:
            asked_now = user if asked.problem is None else again(user, asked.problem)
            reply = await model.acomplete(system=system, user=asked_now, max_tokens=800, json_mode=True)
        except ModelUnavailable as exc:
            asked.problem, asked.unavailable = f"judge unavailable: {exc}", True
            return asked
        except BadReply as exc:
            asked.problem = f"judge reply unusable: {exc}"
            continue
        try:
            asked.value = read(json_object(reply.text, finish_reason=reply.finish_reason))
        except BadReply as exc:
            asked.calls.append(reply.call("evaluator", prompt_version, outcome="unparseable"))
            asked.problem = f"judge reply unusable: {exc}"
            continue
        asked.calls.append(reply.call("evaluator", prompt_version))
        asked.problem = None
        return asked
    return asked


def read_claims(value: dict[str, Any], answer: AnswerV1) -> list[ClaimJudgement]:
    items = value.get("claims")
    if not isinstance(items, list):
        raise BadReply("'claims' must be a list")
    ids = [d.doc_id for d in answer.docs]
    claims = []
    for i, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("claim"), str) or not item["claim"].strip():
            raise BadReply(f"claims[{i}] needs a non-empty 'claim'")
        supported = as_bool(item.get("supported"), f"claims[{i}].supported")
        evidence = item.get("evidence") or []
        if not isinstance(evidence, (list, int, str)) or isinstance(evidence, bool):
            raise BadReply(f"claims[{i}].evidence must be a list of block numbers")
        numbers = [as_int(n) for n in (evidence if isinstance(evidence, list) else [evidence])]
        refs = [ids[n - 1] for n in numbers if n is not None and 1 <= n <= len(ids)]
        reason = str(item.get("reason") or "") or ("the judge gave no reason" if supported is None else None)
        claims.append(
            ClaimJudgement(text=item["claim"].strip()[:2000], supported=supported, evidence_ids=refs, reason=reason)
        )
    return claims


def read_relevancy(value: dict[str, Any]) -> tuple[list[str], bool | None, bool | None, bool | None, str]:
    questions = value.get("questions")
    if not isinstance(questions, list) or not all(isinstance(q, str) for q in questions):
        raise BadReply("'questions' must be a list of strings")
    return (
        questions,
        as_bool(value.get("noncommittal", False), "noncommittal"),
        as_bool(value.get("relevant"), "relevant"),
        as_bool(value.get("complete"), "complete"),
        str(value.get("reason") or ""),
    )


def read_precision(value: dict[str, Any], blocks: int) -> list[bool]:
    items = value.get("verdicts")
    if not isinstance(items, list):
        raise BadReply("'verdicts' must be a list")
    useful: dict[int, bool] = {}
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise BadReply(f"verdicts[{i}] must be an object")
        n, verdict = as_int(item.get("n", i + 1)), as_bool(item.get("useful"), f"verdicts[{i}].useful")
        if n is None or not 1 <= n <= blocks or verdict is None:
            raise BadReply(f"verdicts[{i}] needs 'n' in 1..{blocks} and 'useful' true or false")
        useful[n] = verdict
    if set(useful) != set(range(1, blocks + 1)):
        raise BadReply(f"expected a verdict for each of the {blocks} blocks, got {sorted(useful)}")
    return [useful[n] for n in range(1, blocks + 1)]


@dataclass
class ModelJudge:
    """Judges answers with ``model``; ``embeds`` measures answer relevancy.

    Example::

        judge = ModelJudge(ChatModel.from_settings(settings, spec, setting="KOTAE_EVALUATOR_MODEL"), Embeds("use-multilingual-v3"))
        evaluation = await judge.evaluate(answer, final=True)
    """

    model: ChatModel
    embeds: Embeds
    reask: int = 1
    relevancy_method: str = "model+embedding"

    async def evaluate(self, answer: AnswerV1, *, final: bool) -> EvaluationV1:
        """The evaluation of ``answer``; :class:`ModelUnavailable` propagates unless this is the ``final`` delivery."""
        if answer.outcome != "verified" or not answer.answer:
            return self._record(
                answer,
                [],
                MetricScore(reason=f"no claims to judge ({answer.outcome})", method=METHOD),
                MetricScore(reason=f"no answer to judge ({answer.outcome})", method=self.relevancy_method),
                None
                if not answer.docs
                else MetricScore(
                    reason=f"relevance unknown without a verified answer ({answer.outcome})", method=METHOD
                ),
                _unjudged(answer),
                [],
            )
        user = render_user(answer)
        readers: dict[str, Callable[[dict[str, Any]], Any]] = {
            "faithfulness": lambda v: read_claims(v, answer),
            "answer_relevancy": read_relevancy,
            "context_precision": lambda v: read_precision(v, len(answer.docs)),
        }
        # Without context there is nothing to check claims or documents against: only relevancy is asked.
        asks = {
            name: await _ask(self.model, version, user, self.reask, readers[name])
            for name, version in PROMPT_VERSIONS.items()
            if name == "answer_relevancy" or answer.docs
        }
        unavailable = [a.problem for a in asks.values() if a.unavailable]
        if unavailable and not final:
            raise ModelUnavailable(unavailable[0] or "judge unavailable")
        calls = [c for a in asks.values() for c in a.calls]
        if len(unavailable) == len(asks):
            ev = failed_evaluation(
                answer, unavailable[0] or "judge unavailable", method=METHOD, model=self.model.name, mode="model"
            )
            return ev.model_copy(update={"prompt_versions": self._prompts(answer), "model_calls": calls})

        claims, faith = self._faithfulness(answer, asks.get("faithfulness"))
        relevancy, relevant, complete = await self._relevancy(answer, asks["answer_relevancy"])
        precision = self._precision(answer, asks.get("context_precision"))
        timely = judge_timely(answer)
        if timely.value is False:
            relevant = Judged(value=False, reason=f"answers for another period: {timely.reason}")
            complete = Judged(value=False, reason="no answer for the question's date")
        supported = summarize_claims(claims) if claims or faith.value is not None else Judged(reason=faith.reason)
        judgement = AnswerJudgement(
            cited=judge_cited(answer), supported=supported, timely=timely, relevant=relevant, complete=complete
        )
        check_summary(judgement.supported, claims, where=answer.comment_id)
        return self._record(answer, claims, faith, relevancy, precision, judgement, calls)

    # --- one metric each ---------------------------------------------------------------

    def _faithfulness(self, answer: AnswerV1, asked: _Asked | None) -> tuple[list[ClaimJudgement], MetricScore]:
        if asked is None:
            return [], MetricScore(reason="no retrieved context", method=METHOD)
        if asked.value is None:
            return [], MetricScore(reason=asked.problem, method=METHOD)
        return asked.value, faithfulness_from_claims(asked.value, METHOD)

    async def _relevancy(self, answer: AnswerV1, asked: _Asked) -> tuple[MetricScore, Judged, Judged]:
        method = self.relevancy_method
        if asked.value is None:
            return (
                MetricScore(reason=asked.problem, method=method),
                Judged(reason=asked.problem),
                Judged(reason=asked.problem),
            )
        questions, noncommittal, relevant, complete, reason = asked.value
        relevant_j = Judged(
            value=relevant, reason=reason or ("the judge could not tell" if relevant is None else "the judge's verdict")
        )
        complete_j = Judged(
            value=complete, reason=reason or ("the judge could not tell" if complete is None else "the judge's verdict")
        )
        questions = [q.strip() for q in questions if q.strip()]
        if noncommittal:
            return (
                MetricScore(
                    value=0.0, numerator=0, denominator=max(1, len(questions)), reason="evasive answer", method=method
                ),
                relevant_j,
                complete_j,
            )
        if not questions:
            return (
                MetricScore(reason="the judge wrote no question for the answer", method=method),
                relevant_j,
                complete_j,
            )
        try:
            # Off the event loop: a local model computes, a hosted one blocks on HTTP.
            vectors = await asyncio.to_thread(self.embeds.vectors, [answer.comment.text, *questions])
        except Exception as exc:  # an embedding backend down leaves this one metric unknown
            return (
                MetricScore(reason=f"embedding failed: {type(exc).__name__}: {exc}"[:300], method=method),
                relevant_j,
                complete_j,
            )
        sims = [float(np.clip(vectors[0] @ v, 0.0, 1.0)) for v in vectors[1:]]
        total = sum(sims)
        return (
            MetricScore(
                value=round(total / len(sims), 6), numerator=round(total, 6), denominator=len(sims), method=method
            ),
            relevant_j,
            complete_j,
        )

    def _precision(self, answer: AnswerV1, asked: _Asked | None) -> MetricScore | None:
        if asked is None:
            return None
        if asked.value is None:
            return MetricScore(reason=asked.problem, method=METHOD)
        return rank_weighted_precision(asked.value, METHOD)

    # --- the record ------------------------------------------------------------------

    def _prompts(self, answer: AnswerV1) -> dict[str, str]:
        # The configured prompts, also on answers that needed none, so one configuration is one report group.
        return dict(PROMPT_VERSIONS)

    def _record(
        self,
        answer: AnswerV1,
        claims: list[ClaimJudgement],
        faith: MetricScore,
        relevancy: MetricScore,
        precision: MetricScore | None,
        judgement: AnswerJudgement,
        calls: list[ModelCall],
    ) -> EvaluationV1:
        return record(
            answer,
            faithfulness=faith,
            answer_relevancy=relevancy,
            context_precision=precision,
            method=METHOD,
            model=self.model.name,
            mode="model",
            prompt_versions=self._prompts(answer),
            model_calls=calls,
            judgement=judgement,
            claims=claims,
        )


def _unjudged(answer: AnswerV1) -> AnswerJudgement:
    why = Judged(reason=f"no answer to judge ({answer.outcome})")
    return AnswerJudgement(cited=why, supported=why, timely=why, relevant=why, complete=why)
