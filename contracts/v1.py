"""Version 1 of every message on kotae's bus.

Each message carries its comment's id (the correlation id of the whole
pipeline), its own message id, the schema version, timestamps and the stream id,
and everything a stage needs to do its work: no stage looks anything up to
process a message. Additive changes only within v1.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator


def _now() -> datetime:
    return datetime.now(UTC)


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
    comment_id: str = Field(
        min_length=1, max_length=200, description="The comment this message is about; the correlation id."
    )
    stream_id: str = Field(
        min_length=1, max_length=200, description="The live stream (channel/broadcast) the comment came from."
    )
    created_at: datetime = Field(default_factory=_now, description="When this message was made (UTC).")


class SuperChat(BaseModel):
    """A paid comment: amount in the currency's major unit."""

    model_config = ConfigDict(frozen=True)

    amount: float = Field(ge=0)
    currency: str = Field(min_length=3, max_length=3)


MembershipKind = Literal["new_member", "milestone", "gift", "gift_received"]


class Membership(BaseModel):
    """A membership event of the platform: someone joined, renewed, gave or received a membership.

    YouTube's ``newSponsorEvent`` (``new_member``), ``memberMilestoneChatEvent`` (``milestone``, the
    only kind with a message of the viewer's own), ``membershipGiftingEvent`` (``gift``: the giver) and
    ``giftMembershipReceivedEvent`` (``gift_received``). The on-air stage thanks it; a milestone's
    message is also a question candidate.
    """

    model_config = ConfigDict(frozen=True)

    kind: MembershipKind
    level: str | None = Field(default=None, max_length=200, description="The membership level's name.")
    months: int | None = Field(default=None, ge=0, description="A milestone's months of membership.")
    gifts: int | None = Field(default=None, ge=0, description="How many memberships a gift gave.")
    with_message: bool = Field(
        default=False,
        description="The viewer wrote a message with it (a milestone's comment): the comment's `text` is theirs "
        "and may be a question. False: the text is the platform's own line, never read or answered.",
    )


M = TypeVar("M", bound="PipelineMessage")


class _Forwarding:
    """How a message about a comment makes the next one: see :meth:`forward`.

    Each message that uses it says what it carries so far in ``_so_far()``: the
    comment, the method of each stage, the model calls and why a stage fell back.
    """

    _so_far: Callable[[], tuple[CommentV1, dict[str, str], list[ModelCall], str | None]]

    def forward(
        self,
        cls: type[M],
        *,
        stage: str,
        method: str | None = None,
        calls: Sequence[ModelCall] = (),
        degraded: str | None = None,
        **fields: Any,
    ) -> M:
        """The next message about this comment: ``stage``'s own ``fields`` plus everything carried so far.

        ``method`` is recorded under ``stage`` (and as the message's own ``method``
        where it has one); ``calls`` are appended to the model calls; ``degraded``
        is the reason when this stage fell back. A ``comment`` among ``fields``
        replaces the one carried (a reply joined to the question it answers).
        """
        comment, methods, model_calls, degraded_reason = self._so_far()
        comment = fields.pop("comment", comment)
        if method is not None and "method" in cls.model_fields:
            fields.setdefault("method", method)  # a hop's own record of how it was made
        return cls(
            comment_id=comment.comment_id,
            stream_id=comment.stream_id,
            comment=comment,
            methods={**methods, stage: method} if method else dict(methods),
            model_calls=[*model_calls, *calls],
            degraded=degraded is not None or degraded_reason is not None,
            degraded_reason=degraded if degraded is not None else degraded_reason,
            **fields,
        )


class CommentV1(_Forwarding, _Message):
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
    member: bool = Field(
        default=False, description="The platform says the author is a member of the channel (YouTube: isChatSponsor)."
    )
    author_name: str | None = Field(
        default=None,
        max_length=200,
        description="The author's display name as the platform shows it, when `author` is a hashed id.",
    )
    membership: Membership | None = Field(
        default=None,
        description="The membership event this comment stands for (None: an ordinary comment); the on-air stage "
        "thanks it. Its `text` is the viewer's message, or for an event without one the platform's own line.",
    )
    rewrite: Text | None = Field(
        default=None,
        description="The comment as a standalone question in ordinary words, written by the retriever's rewrite "
        "model (KOTAE_REWRITE_MODEL) and kept with every name and number of the comment; later stages read it as "
        "a second wording of the question. None without a rewrite model.",
    )

    def _so_far(self) -> tuple[CommentV1, dict[str, str], list[ModelCall], str | None]:
        return self, {}, [], None


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
    prompt_version: str | None = Field(
        default=None, description="Versioned prompt file the call used, e.g. 'rerank.v1'."
    )
    outcome: str = Field(default="ok", description="ok, or why the reply was not used (e.g. 'unparseable').")


class PipelineMessage(_Forwarding, _Message):
    """A message about one comment on its way through the stages.

    It carries the comment and what every stage so far did: the method each used,
    the model calls it cost, and whether one fell back. A stage makes its output
    with :meth:`forward`, so none of that is copied by hand::

        retrieval.forward(RerankV1, stage="reranker", method="keep_top_n", docs=docs)
    """

    comment: CommentV1
    methods: dict[str, str] = Field(
        default_factory=dict, description="Method per stage so far, e.g. {'retriever': 'hybrid'}."
    )
    model_calls: list[ModelCall] = Field(default_factory=list, description="Model calls made for this comment so far.")
    degraded: bool = Field(
        default=False, description="True once a stage fell back (e.g. the reranker to retrieval order)."
    )
    degraded_reason: str | None = Field(default=None, description="Why a stage fell back, when one did.")

    def _so_far(self) -> tuple[CommentV1, dict[str, str], list[ModelCall], str | None]:
        return self.comment, self.methods, self.model_calls, self.degraded_reason


class RetrievalV1(PipelineMessage):
    """Retriever → reranker: the evidence found for a comment that passed the gate."""

    schema_version: Literal["retrieval.v1"] = "retrieval.v1"
    gate: Gate
    top_score: float
    docs: list[Evidence] = Field(default_factory=list, description="Best first.")
    faq: list[FaqEvidence] = Field(default_factory=list, description="Best first.")
    method: str = Field(description="How retrieval was done, e.g. 'hybrid'.")
    kb: str | None = Field(default=None, description="Knowledge base the evidence came from.")
    clarified_from: str | None = Field(
        default=None, description="Comment id of the ask-back this comment answered; its candidates are the evidence."
    )
    query: str | None = Field(
        default=None, description="The model's standalone rewrite of the comment, when one was searched too."
    )
    prompt_version: str | None = Field(default=None, description="Version of the prompt that produced `query`.")

    @model_validator(mode="before")
    @classmethod
    def _methods_of_older_messages(cls, data: Any) -> Any:
        # Retrievals published before `methods` was carried name their method only.
        if isinstance(data, dict) and "methods" not in data and isinstance(data.get("method"), str):
            data = {**data, "methods": {"retriever": data["method"]}}
        return data


class RerankV1(PipelineMessage):
    """Reranker → generator: the relevant documents, most relevant first."""

    schema_version: Literal["rerank.v1"] = "rerank.v1"
    docs: list[Evidence]
    faq: list[FaqEvidence] = Field(default_factory=list)
    top_score: float = 0.0
    method: str = Field(description="How reranking was done, e.g. 'keep_top_n'.")
    slide: int | str | None = Field(default=None, description="Slide of the top-1 document.")
    prompt_version: str | None = Field(
        default=None, description="Version of the prompt that ordered the documents (model method)."
    )


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
    uncited_sentences: list[str] = Field(
        default_factory=list, description="Sentences that make a claim without a marker."
    )


class DraftV1(PipelineMessage):
    """Generator → verifier: an answer with citations, not yet checked."""

    schema_version: Literal["draft.v1"] = "draft.v1"
    docs: list[Evidence]
    faq: list[FaqEvidence] = Field(default_factory=list)
    answer: Text = Field(description="Display text with [N] markers.")
    speech: Text = Field(description="The same answer without markers, to be read aloud.")
    citations: list[Citation] = Field(default_factory=list)
    slide: int | str | None = None
    not_found: bool = Field(
        default=False, description="True when the documents do not answer and the fixed sentence was used."
    )
    citation_check: CitationCheck
    method: str = Field(description="How the draft was made, e.g. 'extractive'.")
    prompt_version: str | None = None


class CachedFrom(BaseModel):
    """The verified answer a cached answer repeats: the comment it was made for, its message and its trace."""

    model_config = ConfigDict(frozen=True)

    comment_id: str = Field(description="The comment the answer was first verified for.")
    message_id: str = Field(description="The answer.v1 message that verified it.")
    trace_id: str | None = Field(default=None, description="That comment's trace, where retrieval and checks ran.")
    verified_at: datetime = Field(description="When it was verified.")
    model_calls: list[ModelCall] = Field(
        default_factory=list, description="The model calls the first answer cost (this one cost none)."
    )


class AnswerV1(PipelineMessage):
    """A terminal outcome for a comment; subscribers (overlay, TTS, evaluator) read these."""

    schema_version: Literal["answer.v1"] = "answer.v1"
    outcome: Outcome
    answer: Text | None = Field(default=None, description="What to show, with [N] markers (None when nothing is said).")
    speech: Text | None = Field(default=None, description="What to say aloud, without markers.")
    citations: list[Citation] = Field(default_factory=list)
    slide: int | str | None = None
    verdict: int | None = Field(
        default=None, ge=0, le=3, description="Verifier's class: 0 none, 1 contradicts, 2 unsupported, 3 invented."
    )
    reason: str | None = Field(
        default=None, description="Why the comment ended this way (gate, triage or verifier reason)."
    )
    reasons: list[str] = Field(default_factory=list, description="Detailed findings (which sentence, which claim).")
    decided_by: str | None = Field(
        default=None,
        description="Which path of the verifier decided: 'offline', 'model', or 'floor' (the programmatic floor "
        "overruled the model); None for outcomes the verifier did not decide.",
    )
    draft: Text | None = Field(default=None, description="The rejected draft, kept for audit.")
    candidates: list[str] = Field(default_factory=list, description="Candidate topics when asking back (clarify).")
    docs: list[Evidence] = Field(default_factory=list, description="The evidence the answer stands on.")
    trace_id: str | None = None
    merged_into: str | None = Field(
        default=None,
        description="Comment id of the earlier, near-identical question this one was merged into (dropped).",
    )
    cached_from: CachedFrom | None = Field(
        default=None,
        description="A verified answer repeated from ingest's answer cache (methods name 'cached'): the original.",
    )


class MetricScore(BaseModel):
    """One metric of one answer: a value, or None with the reason it could not be judged."""

    model_config = ConfigDict(frozen=True)

    value: float | None = Field(default=None, ge=0.0, le=1.0)
    numerator: float | None = None
    denominator: float | None = None
    reason: str | None = None
    method: str | None = Field(
        default=None, description="How this metric was judged, e.g. 'lexical' (offline) or 'model'."
    )


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
    relevant: Judged = Field(
        default_factory=Judged, description="The answer addresses the question's subject, conditions and time."
    )
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
    prompt_versions: dict[str, str] = Field(
        default_factory=dict, description="Judge prompt per metric, e.g. {'faithfulness': 'faithfulness.v1'}."
    )
    model_calls: list[ModelCall] = Field(default_factory=list, description="Calls the judge made for this evaluation.")
    viewer_comment: CommentV1 | None = Field(
        default=None,
        description="The comment the answer replied to (not `comment`: an evaluation's origin is its answer).",
    )
    answer_outcome_reason: str | None = Field(
        default=None, description="The answer's own reason (gate, triage or verifier)."
    )
    kb: str | None = Field(default=None, description="Knowledge base the answer drew on.")
    evidence_versions: dict[str, str] = Field(
        default_factory=dict, description="Version of each evidence document, by doc id."
    )
    set_version: str | None = Field(
        default=None, description="Version of the labelled question set, when the comment came from `kotae eval`."
    )
    judgement: AnswerJudgement | None = Field(
        default=None, description="cited/supported/timely/relevant/complete, each with its reason."
    )
    claims: list[ClaimJudgement] = Field(
        default_factory=list, description="The answer's claims, each with its support."
    )
    answer_models: dict[str, str] = Field(
        default_factory=dict,
        description="Hosted model each stage called for the answer, by stage (empty: an offline pipeline).",
    )
    cached_from: str | None = Field(
        default=None, description="The answer came from the answer cache: the comment it was first verified for."
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


ModerationAction = Literal["message_deleted", "user_banned"]


class ModerationV1(BaseModel):
    """A platform's moderators, or the stream's operator, withdrew a comment or a viewer.

    ``message_deleted`` names the comment (``comment_id``); ``user_banned`` names the
    viewer as the bus knows them (``author``: the hashed platform id, or the display
    name where the platform gives no id). Whatever has not aired of theirs never will.
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    schema_version: Literal["moderation.v1"] = "moderation.v1"
    message_id: str = Field(default_factory=_new_id)
    created_at: datetime = Field(default_factory=_now)
    stream_id: str = Field(min_length=1, max_length=200)
    action: ModerationAction
    comment_id: str | None = Field(default=None, max_length=200, description="The deleted comment (message_deleted).")
    author: str | None = Field(
        default=None, max_length=200, description="The banned viewer, hashed as on their comments (user_banned)."
    )
    ban_type: Literal["permanent", "temporary"] | None = None
    ban_duration_s: int | None = Field(default=None, ge=0, description="How long a temporary ban lasts.")
    source: str = Field(description="Who said so: youtube, onecomme, replay, or operator:<NATS user>.")
    platform_id: str | None = Field(
        default=None,
        max_length=200,
        description="The platform's id of this moderation event (a resend is stored once).",
    )
    at: datetime | None = Field(default=None, description="When the platform says it happened.")

    @model_validator(mode="after")
    def _names_its_target(self) -> ModerationV1:
        if self.action == "message_deleted" and not self.comment_id:
            raise ValueError("a message_deleted event names the comment (comment_id)")
        if self.action == "user_banned" and not self.author:
            raise ValueError("a user_banned event names the viewer (author)")
        return self


ControlCommand = Literal["skip", "next", "pause", "resume", "hold", "approve", "reject", "block", "end"]


class ControlV1(BaseModel):
    """An operator's command to the on-air stage.

    Its subject is ``kotae.control.v1.<command>.<NATS user>`` and a user may publish only
    its own, so the subject says who sent it; ``issued_by`` repeats it for readers of the
    payload alone. ``target``: ``on``/``off`` for ``hold``, a comment id for
    ``next``/``approve``/``reject``, an author (as the bus knows them) for ``block``.
    ``next`` puts that answer first in the queue (and, in hold mode, approves it).
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    schema_version: Literal["control.v1"] = "control.v1"
    message_id: str = Field(default_factory=_new_id)
    created_at: datetime = Field(default_factory=_now)
    stream_id: str = Field(min_length=1, max_length=200)
    command: ControlCommand
    target: str | None = Field(default=None, max_length=200)
    issued_by: str = Field(min_length=1, max_length=200, description="The NATS user that sent it.")
    via: str | None = Field(
        default=None,
        max_length=200,
        description="Where the operator sent it from when not the CLI, e.g. 'console 127.0.0.1' (the on-air console).",
    )

    @model_validator(mode="after")
    def _target_fits_the_command(self) -> ControlV1:
        if self.command == "hold" and self.target not in ("on", "off"):
            raise ValueError("hold takes 'on' or 'off'")
        if self.command in ("next", "approve", "reject", "block") and not self.target:
            raise ValueError(f"{self.command} names its target")
        return self


OnAirEvent = Literal[
    "queued", "started", "sentence", "finished", "expired", "withdrawn", "skipped", "shed", "already_aired"
]
Tier = Literal["superchat", "member", "everyone"]


class Asker(BaseModel):
    """A viewer who asked a question: its own author, or one whose near-identical question was merged into it."""

    model_config = ConfigDict(frozen=True)

    comment_id: str
    author: str = Field(max_length=200, description="As the bus knows them (hashed id or display name).")
    author_name: str | None = Field(default=None, max_length=200)


class SpokenSentence(BaseModel):
    """One sentence of an airing as the voice says it: its own clip, and when it plays.

    The voice starts on the first sentence while the rest is made: ``started`` carries the
    first, each ``sentence`` event the next one, the moment it is ready. A sentence plays at
    ``started_at + offset_ms``, right after the one before it, or later when it was not ready
    in time (the silence is real, and the offsets say so).
    """

    model_config = ConfigDict(frozen=True)

    n: int = Field(ge=1, description="Its place in the airing, 1 first.")
    of: int = Field(ge=1, description="How many sentences the airing says.")
    text: str = Field(max_length=4000, description="What the voice says in it.")
    offset_ms: int = Field(ge=0, description="When it starts, in ms after the airing's started_at.")
    audio_ms: int = Field(ge=0, description="How long it plays (its audio, or its reading time when text only).")
    audio_url: str | None = Field(
        default=None, description="Its own clip on the stage's HTTP server (None: text only)."
    )


class OnAirEventV1(_Message):
    """What the on-air stage did with one answer: queued, started, finished, or why it did not air.

    ``comment_id`` is the answered comment (``faq:<id>`` for an FAQ entry aired while the
    chat was quiet). Every verified answer gets exactly one final event: ``finished``
    (aired; ``reason`` ``voice_failed: …`` when it was shown as text only), ``expired``,
    ``withdrawn``, ``skipped``, ``shed`` or ``already_aired``. Events carry the
    comment's trace context in their headers. A Super Chat whose question was answered
    already (or has none, or none could be answered) airs as ``kind: thanks``: a fixed
    thanks naming the viewer, ``credited_to`` the comment whose answer aired.
    """

    schema_version: Literal["onair.v1"] = "onair.v1"
    event: OnAirEvent
    kind: Literal["answer", "faq", "thanks"] = Field(
        default="answer",
        description="answer: a verified answer; faq: an FAQ entry aired while the chat was quiet; thanks: a Super "
        "Chat thanked on air (its question answered already, unanswered, or none), its message never read.",
    )
    show_id: str | None = Field(
        default=None,
        max_length=200,
        description="The show it aired in: what was verified before a show began never airs in it.",
    )
    answer_message_id: str | None = Field(default=None, description="The answer.v1 message aired (None for FAQ).")
    question: Text | None = Field(
        default=None, description="The viewer's question, only once it passed the filters (None: not to be shown)."
    )
    question_withheld: str | None = Field(default=None, description="Why the question is neither shown nor read.")
    answer: Text | None = Field(default=None, description="Display text with [N] markers.")
    speech: Text | None = Field(default=None, description="What the voice says.")
    lang: Lang = "ja"
    citations: list[Citation] = Field(default_factory=list)
    slide: int | str | None = None
    author: str | None = None
    author_name: str | None = None
    askers: list[Asker] = Field(default_factory=list, description="Everyone who asked it, its own author first.")
    tier: Tier = "everyone"
    superchat: SuperChat | None = None
    verdict: int | None = Field(default=None, ge=0, le=3)
    received_at: datetime | None = Field(default=None, description="When ingest received the comment.")
    verified_at: datetime | None = Field(default=None, description="When the answer was verified.")
    queue_position: int | None = Field(default=None, ge=1, description="Place in the queue when queued (1: next).")
    queue_length: int | None = Field(default=None, ge=0)
    started_at: datetime | None = Field(default=None, description="When it went on air (the server's clock).")
    ends_at: datetime | None = Field(
        default=None,
        description="When its audio ends by the server's clock; on started and sentence, the audio announced so far.",
    )
    audio_ms: int | None = Field(
        default=None,
        ge=0,
        description="Length of the audio (None: text only); on started and sentence, of the sentences announced so far.",
    )
    audio_url: str | None = Field(
        default=None,
        description="Path of its audio on the stage's HTTP server: the first sentence's clip on started, the next "
        "sentence's on sentence, the whole answer's on a final event.",
    )
    sentence: SpokenSentence | None = Field(
        default=None, description="started and sentence: the sentence this event puts on air, with its own clip."
    )
    voice: str | None = Field(default=None, description="The voice that spoke it, e.g. 'openjtalk:mei'.")
    reason: str | None = None
    by: str | None = Field(default=None, description="NATS user of the operator whose command caused it.")
    resumed: bool = Field(default=False, description="Aired again from the start after the previous speaker stopped.")
    attempt: int = Field(default=1, ge=1, description="1, or 2 for an answer aired again after a takeover.")
    credited_to: str | None = Field(
        default=None,
        description="already_aired, or a thanks: the comment whose near-identical answer aired.",
    )
    replica: str | None = Field(default=None, description="The on-air process that published it.")
    trace_id: str | None = None


SCHEMAS: dict[str, type[BaseModel]] = {
    "comment.v1": CommentV1,
    "retrieval.v1": RetrievalV1,
    "rerank.v1": RerankV1,
    "draft.v1": DraftV1,
    "answer.v1": AnswerV1,
    "evaluation.v1": EvaluationV1,
    "deadletter.v1": DeadLetterV1,
    "moderation.v1": ModerationV1,
    "control.v1": ControlV1,
    "onair.v1": OnAirEventV1,
}
