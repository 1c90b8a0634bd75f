"""How a draft is decided: does it answer the question, then is it supported — and who says so.

One function, :func:`decide`, that the bus edge calls once per draft:

0. **The citation check**: a claim that cites nothing, or a block that does not exist, is
   rejected at once (class 2), by every mode.
1. **Relevance** (offline, :mod:`kotae.language.relevance`), before anything is verified: a draft that
   does not address the question's focus (the thing asked about, the kind of answer asked for)
   — in the viewer's words or in the rewrite model's wording of them — ends ``unanswered`` with
   a ``not_found`` reason that says what was missing. With a model that judges relevance
   (``verify.v2``, class 4) the offline judgement is a doubt, never a veto: whether a draft
   answers the question is the model's call (a perfect model's correct answers were vetoed by
   the word-level check, ``bench/oracle.py``); only the hard floors stay under it — the citation
   check, and every number and name of a claim in the blocks it cites (``model.py``).
2. **Support**, by the mode (``KOTAE_VERIFIER_MODE``):

   - ``offline``: the offline method decides. Its unsure verdicts go to the configured side
     (``KOTAE_VERIFIER_UNSURE``: reject by default — fail closed);
   - ``model``: the model decides every draft (prompt ``KOTAE_VERIFIER_PROMPT``; with
     ``verify.v2`` relevance is its own class, 4, which ends ``unanswered``), under the citation
     check and the lexical floor;
   - ``cascade``: the offline method's confident verdicts (supported or hallucinated) stand
     without a model call; the unsure ones go to the model, as in ``model`` mode. So does a
     supported draft the offline relevance check doubts (with a prompt that asks relevance),
     and a supported draft that may answer only in part: the evidence it cites has another sentence
     giving the kind of answer asked for about what was asked, which the draft leaves out
     (asked 保育料っていくら, it says only 第2子以降は無料 while the cap of 1万5千円 stands beside
     it). Whether that is the answer is a judgement, which a model makes better than a rule.

Every decision says which path decided it (``decided_by``): ``offline``, ``model``, or ``floor``
(the programmatic floor rejected what the model passed). A model that errors propagates
(``ModelUnavailable``) so the edge redelivers it, then rejects with ``verifier_unavailable``; a
reply that stays unparseable rejects the same way. Nothing is verified without a check that ran.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from kotae.citations import MARKER, Block, faq_question, numbered_blocks, strip_markers, without_title_label
from kotae.contracts import DraftV1, ModelCall
from kotae.language.question_focus import holds_kind, question_focus
from kotae.language.relevance import METHOD as RELEVANCE_METHOD, Relevance, relevance, relevance_to_any
from kotae.language.sentence_analysis import analyse
from kotae.language.text import split_sentences
from kotae.providers import ChatModel
from kotae.services.verifier.alignment import leans_on_question
from kotae.services.verifier.logic import METHOD, SURE, Verdict, verify
from kotae.services.verifier.model import ASKS_RELEVANCE, PROMPT, citation_findings, model_verify
from kotae.settings import Settings

Outcome = Literal["verified", "rejected", "unanswered"]
Mode = Literal["offline", "model", "cascade"]


@dataclass(frozen=True)
class VerifierPolicy:
    """How this verifier decides: its mode, its model, and how it reads the offline method."""

    mode: Mode = "offline"
    model: ChatModel | None = None
    reask: int = 1
    sure: float = SURE
    unsure: Literal["reject", "accept"] = "reject"
    prompt_version: str = PROMPT
    relevance: Literal["veto", "model"] = "veto"  # who decides a draft the offline relevance check doubts

    @classmethod
    def from_settings(cls, settings: Settings) -> VerifierPolicy:
        model = ChatModel.configured(settings, "verifier_model")
        mode: Mode
        if settings.verifier_mode == "auto":
            mode = "model" if model is not None else "offline"
        else:
            mode = settings.verifier_mode
        return cls(
            mode=mode,
            model=model,
            reask=settings.model_reask,
            sure=settings.verifier_cascade_sure if mode == "cascade" else settings.verifier_sure,
            unsure=settings.verifier_unsure,
            prompt_version=settings.verifier_prompt,
            relevance=settings.verifier_relevance,
        )

    @property
    def model_judges_relevance(self) -> bool:
        """Whether a model decides if a draft answers the question (``KOTAE_VERIFIER_RELEVANCE=model`` and a
        prompt that asks it, as class 4): then the offline relevance check sends its doubts to the model instead
        of vetoing. Not by default: the local 1.5B model verified an answer to another question so."""
        return (
            self.relevance == "model"
            and self.mode != "offline"
            and self.model is not None
            and self.prompt_version in ASKS_RELEVANCE
        )

    @property
    def method(self) -> str:
        """The method name every answer of this verifier carries."""
        return {"offline": METHOD, "model": "model", "cascade": f"cascade({METHOD}+model)"}[self.mode]


@dataclass(frozen=True)
class VerifierDecision:
    """What becomes of one draft, why, and who decided."""

    outcome: Outcome
    verdict: int | None
    reason: str
    reasons: list[str]
    decided_by: Literal["offline", "model", "floor"]
    method: str
    calls: list[ModelCall] = field(default_factory=list)
    support: float | None = None  # the offline method's score, when it ran
    relevance: Relevance | None = None


def cited_blocks(draft: DraftV1) -> list[Block]:
    """The numbered blocks the draft cites (all of them when it cites none)."""
    blocks = numbered_blocks(list(draft.docs), list(draft.faq))
    cited = {int(n) for n in MARKER.findall(draft.answer)}
    return [b for b in blocks if b.n in cited] or blocks


def _with_sources(sentences: list[str], blocks: list[Block]) -> list[str]:
    """A bare answer (小笠原諸島です) means what the evidence sentence it stands in says: read it with
    that sentence (the one its longest term occurs in); the slot check sees that it stands where
    the question's slot is."""
    out = list(sentences)
    for sentence in sentences:
        claim = analyse(sentence)
        if not claim.terms or not leans_on_question(claim):
            continue
        head = max(claim.terms, key=lambda t: len(t.text)).text
        out += [s for b in blocks for s in split_sentences(b.text) if head in s][:1]
    return out


def draft_relevance(draft: DraftV1) -> Relevance:
    """Does the draft address what its comment asks about (offline), in the viewer's words or in the
    rewrite model's wording of them (``comment.rewrite``, when there is one)?"""
    blocks = cited_blocks(draft)
    sentences = [strip_markers(without_title_label(s, blocks)) for s in split_sentences(draft.answer)]
    asked = [q for b in blocks for q in faq_question(b)]
    return relevance_to_any(
        draft.comment.text,
        draft.comment.rewrite,
        _with_sources(sentences, blocks),
        [(b.title, b.text) for b in blocks],
        read_with=asked,
    )


def left_out(draft: DraftV1) -> list[str]:
    """Sentences of the cited evidence that give the kind of answer the question asks for with a
    wh-word, address what it asks about, and are not in the draft: what a partial answer leaves out."""
    focus = question_focus(draft.comment.text)
    if not (focus.explicit and focus.kinds):
        return []
    blocks = cited_blocks(draft)
    said = strip_markers(draft.answer)
    out = []
    for block in blocks:
        for sentence in split_sentences(block.text):
            bare = strip_markers(sentence).rstrip("。.")
            if not bare or bare in said or not any(holds_kind(k, sentence) for k in focus.kinds):
                continue
            if relevance(
                draft.comment.text, [sentence], [(block.title, block.text)], read_with=faq_question(block)
            ).relevant:
                out.append(sentence)
    return out


def _offline(verdict: Verdict, policy: VerifierPolicy, method: str, rel: Relevance) -> VerifierDecision:
    decision = verdict.decision
    reasons = list(verdict.reasons)
    common = {"decided_by": "offline", "method": method, "support": verdict.support, "relevance": rel}
    if decision == "unsure":
        reasons.append(f"unsure: support {verdict.support:.2f} between {1 - policy.sure:.2f} and {policy.sure:.2f}")
        if policy.unsure == "accept":
            return VerifierDecision("verified", 0, "verified (unsure, accepted)", reasons, **common)
        first = reasons[0]  # the finding, or why a clean draft is still a doubt, else the score
        return VerifierDecision("rejected", verdict.verdict or 2, f"unsure: {first}", reasons, **common)
    if decision == "supported":
        return VerifierDecision("verified", 0, "verified", reasons, **common)
    return VerifierDecision(
        "rejected", verdict.verdict, f"hallucination class {verdict.verdict}: {reasons[0]}", reasons, **common
    )


async def _by_model(
    draft: DraftV1, policy: VerifierPolicy, method: str, rel: Relevance, support: float | None
) -> VerifierDecision:
    assert policy.model is not None
    result = await model_verify(draft, policy.model, reask=policy.reask, prompt_version=policy.prompt_version)
    common = {"method": method, "calls": result.calls, "support": support, "relevance": rel}
    if result.unavailable:
        return VerifierDecision("rejected", None, result.reasons[0], result.reasons, "model", **common)
    if result.irrelevant:
        reason = f"not_found: the model judged it does not answer the question: {'; '.join(result.reasons)}"
        return VerifierDecision("unanswered", None, reason, result.reasons, "model", **common)
    by = "floor" if result.floor else "model"
    if result.verdict == 0:
        return VerifierDecision("verified", 0, "verified", result.reasons, by, **common)
    reason = f"hallucination class {result.verdict}: {result.reasons[0]}"
    return VerifierDecision("rejected", result.verdict, reason, result.reasons, by, **common)


async def decide(draft: DraftV1, policy: VerifierPolicy) -> VerifierDecision:
    """Relevance first, then support by the policy's mode; see the module docstring."""
    method = policy.method
    cited = citation_findings(draft, len(numbered_blocks(list(draft.docs), list(draft.faq))))
    if cited:
        # A claim citing nothing, or a block that does not exist, is rejected whatever else holds.
        return VerifierDecision("rejected", 2, f"hallucination class 2: {cited[0]}", cited, "offline", method)
    rel = draft_relevance(draft)
    if not rel.relevant and not policy.model_judges_relevance:
        return VerifierDecision(
            "unanswered",
            None,
            f"not_found: {rel.reason}",
            rel.reasons,
            "offline",
            f"{method}+{RELEVANCE_METHOD}",
            relevance=rel,
        )
    if policy.mode == "model":
        return await _by_model(draft, policy, method, rel, None)
    offline = verify(draft.answer, list(draft.docs), list(draft.faq), question=draft.comment.text, sure=policy.sure)
    if policy.mode == "cascade" and (
        offline.decision == "unsure" or (offline.decision == "supported" and (not rel.relevant or left_out(draft)))
    ):
        return await _by_model(draft, policy, method, rel, offline.support)
    return _offline(offline, policy, method, rel)
