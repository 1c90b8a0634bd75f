"""What the verifier does: decide whether a draft may be said on stream.

Verdict classes: 0 none; 1 contradicts the knowledge; 2 states what the
knowledge does not say; 3 invents people, events, organisations or concepts.
This module holds the offline method, ``citation_and_support``: the citation
check (unknown [N], uncited sentences), then every sentence against the blocks
it cites — its key terms aligned to the evidence (alignment.py: each number,
name and noun phrase must be there in the same relation; a bare answer must fill
the slot its question asks about, and one the evidence cannot place at all is unsure,
never supported) and nearly all of its content words present
(kotae.language.grounding.support). A term found only in another relation is class 1, a
number or term found nowhere class 2, a proper name found nowhere class 3.
It fails closed: anything it cannot establish is a detection, never a pass.

Each verdict also carries a support score (0-1) and reads it as supported, hallucinated or
unsure (``Verdict.decision``): what a lexical method cannot settle — a bare answer near the
margin, a term whose neighbours only partly recur, a claim holding most but not all of its
words — is unsure, and decision.py sends it to the model in cascade mode (offline: rejected,
unless KOTAE_VERIFIER_UNSURE=accept).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from kotae.citations import MARKER, Block, citation_check, numbered_blocks, strip_markers, without_title_label
from kotae.contracts import Evidence, FaqEvidence
from kotae.language.answer_slot import SLOT_MARGIN, SLOT_MARGIN_EN, SlotPlaces
from kotae.language.grounding import SUPPORT_THRESHOLD, support
from kotae.language.sentence_analysis import analyse, evidence_sentences, negations
from kotae.language.text import is_japanese, normalize, split_sentences
from kotae.services.verifier.alignment import SLOT_SURE, Finding, align_with_places, leans_on_question

METHOD = "citation_and_support"

#: The fixed not-found sentence (the generator's): said when a draft does not answer the question.
NOT_FOUND = {
    "ja": "ごめんなさい、その質問にお答えできる情報が手元の資料にありませんでした。",
    "en": "Sorry, my documents don't cover that question.",
}

SAFE_REPLY = {
    "ja": "ごめんなさい、その質問には確かな情報でお答えできないため、回答を控えます。",
    "en": "Sorry, I can't give you a reliable answer to that, so I'll pass on it.",
}


Decision = Literal["supported", "hallucinated", "unsure"]

#: The support score at or above which the offline method says supported (and at or below one minus
#: which it says hallucinated): KOTAE_VERIFIER_SURE in offline mode, where unsure is rejected; the
#: cascade reads it at KOTAE_VERIFIER_CASCADE_SURE (CASCADE_SURE), where unsure costs a model call.
SURE = 0.55
CASCADE_SURE = 0.9
#: Content-word coverage (kotae.language.grounding.support) of a claim below which it is surely unsupported;
#: between this and SUPPORT_THRESHOLD the shortfall is a weak finding.
SURELY_UNSUPPORTED = 0.5


@dataclass(frozen=True)
class Verdict:
    """The verdict on one draft: its class, a reason per problem, and the term-level findings
    (claim, term, class, and the evidence sentence and block where it was found) behind them.

    ``support`` is the offline method's score that the draft is supported, 0-1, on a scale that
    can be calibrated: 1 for a claim the evidence states word for word, 0 for a number or name it
    does not hold, between for what a lexical check cannot settle (a bare answer near the margin,
    a term whose neighbours only partly recur, a claim holding most but not all of its words).
    ``decision`` reads it against ``sure``: supported, hallucinated, or unsure.
    """

    verdict: int
    reasons: list[str] = field(default_factory=list)
    method: str = METHOD
    findings: list[Finding] = field(default_factory=list)
    support: float = 1.0
    sure: float = SURE

    @property
    def passed(self) -> bool:
        return self.verdict == 0

    @property
    def decision(self) -> Decision:
        if self.verdict == 0 and self.support >= self.sure:
            return "supported"
        if self.verdict != 0 and self.support <= 1.0 - self.sure:
            return "hallucinated"
        return "unsure"

    def with_sure(self, sure: float) -> Verdict:
        return Verdict(self.verdict, self.reasons, self.method, self.findings, self.support, sure)


@dataclass
class _Claims:
    """What the checks of one draft found, as they go."""

    reasons: list[str] = field(default_factory=list)
    classes: set[int] = field(default_factory=set)
    findings: list[Finding] = field(default_factory=list)
    strengths: list[float] = field(default_factory=list)  # of each problem (1: sure)
    clean: list[float] = field(default_factory=list)  # of each claim without one: how plainly it is supported

    def problem(self, cls: int, reason: str, strength: float = 1.0) -> None:
        self.classes.add(cls)
        self.reasons.append(reason)
        self.strengths.append(strength)

    def verdict(self) -> Verdict:
        verdict = next((c for c in (3, 1, 2) if c in self.classes), 0)
        if verdict:
            support = 0.5 * (1.0 - max(self.strengths))
        else:
            support = 0.5 + 0.5 * min(self.clean, default=1.0)
        return Verdict(verdict, self.reasons, findings=self.findings, support=round(support, 4))


def _sureness_of_pass(places: SlotPlaces | None, japanese: bool) -> float:
    """How plainly a bare answer that passed fills the slot: by how much its place clears the margin."""
    if places is None:
        return 1.0
    answer, rivals = places.scores()
    margin = SLOT_MARGIN if japanese else SLOT_MARGIN_EN
    clearance = max(answer) - max(rivals, default=-math.inf) + margin
    return 1.0 if math.isinf(clearance) else max(0.0, min(1.0, clearance / SLOT_SURE))


#: Share of a claim's words the evidence sentence it is compared with must hold for its polarity to count.
SAME_STATEMENT = 0.8


def _polarity_flip(claim: str, cited: list[Block]) -> Finding | None:
    """A claim that negates the evidence sentence it restates (〜しない for 〜する), or affirms what it denies."""
    c = analyse(claim)
    if len(c.words) < 3 or leans_on_question(c):
        return None  # a bare answer's polarity is its question's
    candidates = [(b.n, s) for b in cited for s in evidence_sentences(b.text)]
    if not candidates:
        return None
    n, best = max(candidates, key=lambda e: len(c.words & e[1].words))
    if len(c.words & best.words) / len(c.words) < SAME_STATEMENT or negations(c) % 2 == negations(best) % 2:
        return None
    said = "negates" if negations(c) % 2 else "affirms what is denied in"
    return Finding(1, claim, "polarity", best.text, n, claim=claim, reason=f"{said} [{n}] (evidence: {best.text!r})")


def _verbatim(claim: str, cited: list[Block]) -> bool:
    """Whether ``claim`` is one of the cited sentences, word for word (widths and spacing aside)."""
    said = _as_quoted(claim)
    return bool(said) and any(_as_quoted(s) == said for b in cited for s in split_sentences(b.text))


def _as_quoted(text: str) -> str:
    return normalize(text).rstrip("。.").replace(" ", "")


def _check_claim(claims: _Claims, sentence: str, cited: list[Block], question: str | None) -> None:
    claim = strip_markers(without_title_label(sentence, cited))
    if _verbatim(claim, cited):
        # A quote of a cited sentence says what the evidence says, however its words are placed
        # (また、その形態。 holds its term in no relation the alignment can read; 非 is no negation).
        claims.clean.append(1.0)
        return
    refs = "".join(f"[{b.n}]" for b in cited)
    evidence = [(b.n, b.text) for b in cited]
    findings, places = align_with_places(claim, evidence, question)
    flipped = _polarity_flip(claim, cited)
    if flipped is not None:
        findings.append(flipped)
    claims.findings += findings
    for f in findings:
        claims.problem(f.cls, f"{claim!r}: {f.describe(refs)}", f.strength)
    result = support(claim, [b.text for b in cited])
    if result.missing_numbers and not any(f.kind == "number" for f in findings):
        claims.problem(2, f"{claim!r}: number(s) {', '.join(result.missing_numbers)} not in {refs}")
    elif not result.supported:
        shortfall = (SUPPORT_THRESHOLD - result.ratio) / (SUPPORT_THRESHOLD - SURELY_UNSUPPORTED)
        claims.problem(
            2,
            f"{claim!r}: only {result.ratio:.0%} of its content is in {refs} "
            f"(missing: {', '.join(result.missing_terms[:6])})",
            min(1.0, shortfall),
        )
    elif not findings and places is None and leans_on_question(analyse(claim)):
        # A bare answer (Xです) says nothing of its own: it is right only where it stands in the evidence
        # as the answer to the question. Placed nowhere (no question, or one with no words to place it
        # by, or a yes/no), the lexical method cannot tell it from a wrong one: a doubt, never supported.
        claims.reasons.append(f"{claim!r}: a bare answer the cited evidence cannot place as the answer to the question")
        claims.clean.append(0.0)
    elif not findings:
        # Supported: plainly when every content word is there, less so near the threshold or the margin.
        words = 1.0 if result.ratio >= 1.0 else (result.ratio - SUPPORT_THRESHOLD) / (1.0 - SUPPORT_THRESHOLD)
        claims.clean.append(min(words, _sureness_of_pass(places, is_japanese(claim + (question or "")))))


def check_answer(answer: str, blocks: list[Block], question: str | None = None, *, sure: float = SURE) -> Verdict:
    """Verdict of ``answer`` against the numbered ``blocks`` it may cite."""
    if not answer.strip():
        return Verdict(2, ["empty answer"], support=0.0, sure=sure)
    claims = _Claims()
    check = citation_check(answer, len(blocks))
    for n in check.unknown_ids:
        claims.problem(2, f"[{n}] cites no evidence block (there are {len(blocks)})")
    for sentence in check.uncited_sentences:
        claims.problem(2, f"uncited claim: {sentence!r}")
    by_n = {b.n: b for b in blocks}
    for sentence in split_sentences(answer):
        cited = [by_n[int(n)] for n in MARKER.findall(sentence) if int(n) in by_n]
        if cited:
            _check_claim(claims, sentence, cited, question)
    return claims.verdict().with_sure(sure)


def verify(
    answer: str, docs: list[Evidence], faq: list[FaqEvidence], *, question: str | None = None, sure: float = SURE
) -> Verdict:
    """The offline verdict of an answer given the evidence it was drafted from.

    ``question`` (the comment) lets a short answer that leans on it ("小笠原諸島です[1]。")
    be checked against the slot the question asks about.
    """
    return check_answer(answer, numbered_blocks(docs, faq), question, sure=sure)
