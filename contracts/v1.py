"""Version 1 of every message on kotae's bus.

Each message carries its comment's id (the correlation id of the whole
pipeline), its own message id, the schema version, timestamps and the stream id,
and everything a stage needs to do its work: no stage looks anything up to
process a message. Additive changes only within v1.
"""

from __future__ import annotations

import uuid
from datetime import date, datetime, timezone
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _new_id() -> str:
    return uuid.uuid4().hex


Outcome = Literal["verified", "rejected", "clarify", "unanswered", "dropped", "failed"]
Gate = Literal["answer", "clarify", "no_match"]
Lang = Literal["ja", "en"]

Text = Annotated[str, Field(max_length=20_000)]


class _Message(BaseModel):
    """Fields every message on the bus carries."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    message_id: str = Field(default_factory=_new_id, description="This message's own id.")
    comment_id: str = Field(min_length=1, max_length=200, description="The comment this message is about; the correlation id.")
    stream_id: str = Field(min_length=1, max_length=200, description="The live stream (channel/broadcast) the comment came from.")
    created_at: datetime = Field(default_factory=_now, description="When this message was made (UTC).")


class SuperChat(BaseModel):
    """A paid comment: amount in the currency's major unit."""

    model_config = ConfigDict(frozen=True)

    amount: float = Field(ge=0)
    currency: str = Field(min_length=3, max_length=3)


class CommentV1(_Message):
    """A viewer's comment admitted by ingest; the input of the retriever."""

    schema_version: Literal["comment.v1"] = "comment.v1"
    author: str = Field(max_length=200, description="Author's display name or hashed channel id.")
    text: Text = Field(min_length=1, description="The comment as the viewer wrote it.")
    normalized: Text = Field(min_length=1, description="NFKC-normalised, whitespace-collapsed text used for search.")
    lang: Lang = "ja"
    published_at: datetime = Field(default_factory=_now, description="When the platform says it was posted.")
    source: str = Field(default="replay", description="Where it came from: replay, stdin, youtube, onecomme, http.")
    superchat: SuperChat | None = None
    priority: int = Field(default=0, description="Higher is answered first (Super Chat > fresh question).")
    kb: str = Field(default="default", description="Knowledge base this stream is bound to.")
    triage: str | None = Field(
        default=None,
        description="How ingest admitted it: 'question_rules', 'model:<prompt version>', 'superchat' or 'ask_back_reply'.",
    )


class Evidence(BaseModel):
    """One retrieved document chunk, carried with its text so later stages need no lookup."""

    model_config = ConfigDict(frozen=True)

    doc_id: str = Field(description="Knowledge-base record id.")
    chunk_id: str
    title: str = ""
    text: Text
    source: str | None = None
    slide: int | str | None = None
    lang: Lang | None = None
    version: str | None = None
    valid_from: date | None = None
    valid_to: date | None = None
    score: float = 0.0


class FaqEvidence(BaseModel):
    """One retrieved FAQ entry."""

    model_config = ConfigDict(frozen=True)

    faq_id: str
    question: Text
    answer: Text
    source: str | None = None
    slide: int | str | None = None
    lang: Lang | None = None
    version: str | None = None
    score: float = 0.0


class ModelCall(BaseModel):
    """One call to a hosted model made for this comment: what ran, what it cost."""

    model_config = ConfigDict(frozen=True)

    stage: str = Field(description="Stage that made the call: retriever (rewrite), reranker, generator, verifier.")
    model: str = Field(description="provider:model as it answered, e.g. 'openai:gpt-4o-mini-2024-07-18'.")
    input_tokens: int | None = None
    output_tokens: int | None = None
    latency_ms: float | None = None
    prompt_version: str | None = Field(default=None, description="Versioned prompt file the call used, e.g. 'rerank.v1'.")
    outcome: str = Field(default="ok", description="ok, or why the reply was not used (e.g. 'unparseable').")


class RetrievalV1(_Message):
    """Retriever → reranker: the evidence found for a comment that passed the gate."""

    schema_version: Literal["retrieval.v1"] = "retrieval.v1"
    comment: CommentV1
    gate: Gate
    top_score: float
    docs: list[Evidence] = Field(default_factory=list, description="Best first.")
    faq: list[FaqEvidence] = Field(default_factory=list, description="Best first.")
    method: str = Field(description="How retrieval was done, e.g. 'hybrid'.")
    kb: str | None = Field(default=None, description="Knowledge base the evidence came from.")
    clarified_from: str | None = Field(
        default=None, description="Comment id of the ask-back this comment answered; its candidates are the evidence."
    )
    query: str | None = Field(default=None, description="The model's standalone rewrite of the comment, when one was searched too.")
    prompt_version: str | None = Field(default=None, description="Version of the prompt that produced `query`.")
    model_calls: list[ModelCall] = Field(default_factory=list, description="Model calls made for this comment so far.")


class RerankV1(_Message):
    """Reranker → generator: the relevant documents, most relevant first."""

    schema_version: Literal["rerank.v1"] = "rerank.v1"
    comment: CommentV1
    docs: list[Evidence]
    faq: list[FaqEvidence] = Field(default_factory=list)
    top_score: float = 0.0
    method: str = Field(description="How reranking was done, e.g. 'keep_top_n'.")
    degraded: bool = Field(default=False, description="True when the reranker fell back to retrieval order.")
    slide: int | str | None = Field(default=None, description="Slide of the top-1 document.")
    methods: dict[str, str] = Field(default_factory=dict, description="Method per stage so far, e.g. {'retriever': 'bm25'}.")
    prompt_version: str | None = Field(default=None, description="Version of the prompt that ordered the documents (model method).")
    degraded_reason: str | None = Field(default=None, description="Why a stage fell back (e.g. an unparseable reranker reply).")
    model_calls: list[ModelCall] = Field(default_factory=list, description="Model calls made for this comment so far.")


class Citation(BaseModel):
    """What a [N] marker in an answer points at."""

    model_config = ConfigDict(frozen=True)

    n: int = Field(ge=1)
    doc_id: str
    chunk_id: str | None = None
    source: str | None = None
    slide: int | str | None = None


class CitationCheck(BaseModel):
    """The programmatic citation check, run on every draft."""

    model_config = ConfigDict(frozen=True)

    ok: bool
    unknown_ids: list[int] = Field(default_factory=list, description="[N] markers that point at no numbered block.")
    uncited_sentences: list[str] = Field(default_factory=list, description="Sentences that make a claim without a marker.")


class DraftV1(_Message):
    """Generator → verifier: an answer with citations, not yet checked."""

    schema_version: Literal["draft.v1"] = "draft.v1"
    comment: CommentV1
    docs: list[Evidence]
    faq: list[FaqEvidence] = Field(default_factory=list)
    answer: Text = Field(description="Display text with [N] markers.")
    speech: Text = Field(description="The same answer without markers, to be read aloud.")
    citations: list[Citation] = Field(default_factory=list)
    slide: int | str | None = None
    not_found: bool = Field(default=False, description="True when the documents do not answer and the fixed sentence was used.")
    citation_check: CitationCheck
    method: str = Field(description="How the draft was made, e.g. 'extractive'.")
    prompt_version: str | None = None
    methods: dict[str, str] = Field(default_factory=dict, description="Method per stage so far, including the generator.")
    degraded: bool = False
    degraded_reason: str | None = None
    model_calls: list[ModelCall] = Field(default_factory=list, description="Model calls made for this comment so far.")


class AnswerV1(_Message):
    """A terminal outcome for a comment; subscribers (overlay, TTS, evaluator) read these."""

    schema_version: Literal["answer.v1"] = "answer.v1"
    comment: CommentV1
    outcome: Outcome
    answer: Text | None = Field(default=None, description="What to show, with [N] markers (None when nothing is said).")
    speech: Text | None = Field(default=None, description="What to say aloud, without markers.")
    citations: list[Citation] = Field(default_factory=list)
    slide: int | str | None = None
    verdict: int | None = Field(default=None, ge=0, le=3, description="Verifier's class: 0 none, 1 contradicts, 2 unsupported, 3 invented.")
    reason: str | None = Field(default=None, description="Why the comment ended this way (gate, triage or verifier reason).")
    reasons: list[str] = Field(default_factory=list, description="Detailed findings (which sentence, which claim).")
    draft: Text | None = Field(default=None, description="The rejected draft, kept for audit.")
    candidates: list[str] = Field(default_factory=list, description="Candidate topics when asking back (clarify).")
    docs: list[Evidence] = Field(default_factory=list, description="The evidence the answer stands on.")
    methods: dict[str, str] = Field(default_factory=dict, description="Method per stage, e.g. {'generator': 'extractive'}.")
    degraded: bool = False
    degraded_reason: str | None = Field(default=None, description="Why a stage fell back, when one did.")
    trace_id: str | None = None
    model_calls: list[ModelCall] = Field(default_factory=list, description="Every model call made for this comment, with tokens.")
    merged_into: str | None = Field(
        default=None, description="Comment id of the earlier, near-identical question this one was merged into (dropped)."
    )


class MetricScore(BaseModel):
    """One metric of one answer: a value, or None with the reason it could not be judged."""

    model_config = ConfigDict(frozen=True)

    value: float | None = Field(default=None, ge=0.0, le=1.0)
    numerator: float | None = None
    denominator: float | None = None
    reason: str | None = None
    method: str | None = Field(default=None, description="How this metric was judged, e.g. 'lexical' (offline) or 'model'.")


class Judged(BaseModel):
    """One true/false judgement of an answer; None when it could not be decided, always with a reason."""

    model_config = ConfigDict(frozen=True)

    value: bool | None = None
    reason: str | None = None


class ClaimJudgement(BaseModel):
    """One claim of an answer and whether its evidence supports it (None: could not tell)."""

    model_config = ConfigDict(frozen=True)

    text: Text
    supported: bool | None = None
    evidence_ids: list[str] = Field(default_factory=list, description="Documents the claim was checked against.")
    reason: str | None = None


class AnswerJudgement(BaseModel):
    """Per-answer judgements a report counts: each true, false or None (unknown) with its reason.

    ``supported`` is true only when every claim is supported, false when any is
    not, and None while any claim is unknown.
    """

    model_config = ConfigDict(frozen=True)

    cited: Judged = Field(default_factory=Judged, description="The answer cites documents that were retrieved for it.")
    supported: Judged = Field(default_factory=Judged, description="Every claim is supported by its evidence.")
    timely: Judged = Field(default_factory=Judged, description="The evidence was valid on the question's date.")
    relevant: Judged = Field(default_factory=Judged, description="The answer addresses the question's subject, conditions and time.")
    complete: Judged = Field(default_factory=Judged, description="No part the question needs is missing.")


class EvaluationV1(_Message):
    """Evaluator's scores of one answer, kept as the audit log."""

    schema_version: Literal["evaluation.v1"] = "evaluation.v1"
    answer_message_id: str
    outcome: Outcome
    question: Text
    answer: Text | None = None
    evidence_ids: list[str] = Field(default_factory=list)
    faithfulness: MetricScore
    answer_relevancy: MetricScore
    context_precision: MetricScore | None = Field(default=None, description="None when there was no context.")
    method: str
    model: str | None = None
    methods: dict[str, str] = Field(default_factory=dict, description="Methods of the stages that made the answer.")
    status: Literal["ok", "failed"] = "ok"
    error: str | None = None
    mode: Literal["offline", "model"] | None = Field(
        default=None, description="offline: every metric judged without a model; model: a model judge was configured."
    )
    prompt_versions: dict[str, str] = Field(default_factory=dict, description="Judge prompt per metric, e.g. {'faithfulness': 'faithfulness.v1'}.")
    model_calls: list[ModelCall] = Field(default_factory=list, description="Calls the judge made for this evaluation.")
    viewer_comment: CommentV1 | None = Field(
        default=None, description="The comment the answer replied to (not `comment`: an evaluation's origin is its answer)."
    )
    answer_outcome_reason: str | None = Field(default=None, description="The answer's own reason (gate, triage or verifier).")
    kb: str | None = Field(default=None, description="Knowledge base the answer drew on.")
    evidence_versions: dict[str, str] = Field(default_factory=dict, description="Version of each evidence document, by doc id.")
    set_version: str | None = Field(default=None, description="Version of the labelled question set, when the comment came from `kotae eval`.")
    judgement: AnswerJudgement | None = Field(default=None, description="cited/supported/timely/relevant/complete, each with its reason.")
    claims: list[ClaimJudgement] = Field(default_factory=list, description="The answer's claims, each with its support.")
    answer_models: dict[str, str] = Field(
        default_factory=dict, description="Hosted model each stage called for the answer, by stage (empty: an offline pipeline)."
    )


class DeadLetterV1(BaseModel):
    """A message a stage could not process, kept with its error and original payload."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    schema_version: Literal["deadletter.v1"] = "deadletter.v1"
    message_id: str = Field(default_factory=_new_id)
    created_at: datetime = Field(default_factory=_now)
    stage: str
    subject: str = Field(description="Subject the message arrived on.")
    error_type: str = Field(description="poison (invalid input) or exhausted (retries used up) or internal.")
    error: str
    comment_id: str | None = Field(default=None, description="When the payload held one.")
    stream_id: str | None = None
    deliveries: int = 1
    payload: str = Field(description="The original payload, as text (UTF-8, or base64 when not UTF-8).")
    payload_encoding: Literal["utf-8", "base64"] = "utf-8"
    headers: dict[str, str] = Field(default_factory=dict)


SCHEMAS: dict[str, type[BaseModel]] = {
    "comment.v1": CommentV1,
    "retrieval.v1": RetrievalV1,
    "rerank.v1": RerankV1,
    "draft.v1": DraftV1,
    "answer.v1": AnswerV1,
    "evaluation.v1": EvaluationV1,
    "deadletter.v1": DeadLetterV1,
}
