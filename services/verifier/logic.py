"""What the verifier does: decide whether a draft may be said on stream.

Verdict classes: 0 none; 1 contradicts the knowledge; 2 states what the
knowledge does not say; 3 invents people, events, organisations or concepts.
This module holds the offline method, ``citation_and_support``: the citation
check (unknown [N], uncited sentences), then every sentence against the blocks
it cites — its key terms aligned to the evidence (alignment.py: each number,
name and noun phrase must be there in the same relation; a bare answer must fill
the slot its question asks about) and nearly all of its content words present
(kotae.grounding.support). A term found only in another relation is class 1, a
number or term found nowhere class 2, a proper name found nowhere class 3.
It fails closed: anything it cannot establish is a detection, never a pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kotae.citations import MARKER, Block, citation_check, numbered_blocks, strip_markers
from kotae.contracts import Evidence, FaqEvidence
from kotae.grounding import support
from kotae.knowledge.text import split_sentences
from kotae.services.verifier.alignment import Finding, align

METHOD = "citation_and_support"

SAFE_REPLY = {
    "ja": "ごめんなさい、その質問には確かな情報でお答えできないため、回答を控えます。",
    "en": "Sorry, I can't give you a reliable answer to that, so I'll pass on it.",
}


@dataclass(frozen=True)
class Verdict:
    """The verdict on one draft: its class, a reason per problem, and the term-level findings
    (claim, term, class, and the evidence sentence and block where it was found) behind them."""

    verdict: int
    reasons: list[str] = field(default_factory=list)
    method: str = METHOD
    findings: list[Finding] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.verdict == 0


def check_answer(answer: str, blocks: list[Block], question: str | None = None) -> Verdict:
    """Verdict of ``answer`` against the numbered ``blocks`` it may cite."""
    reasons: list[str] = []
    classes: set[int] = set()
    found: list[Finding] = []
    if not answer.strip():
        return Verdict(2, ["empty answer"])
    check = citation_check(answer, len(blocks))
    for n in check.unknown_ids:
        reasons.append(f"[{n}] cites no evidence block (there are {len(blocks)})")
    for sentence in check.uncited_sentences:
        reasons.append(f"uncited claim: {sentence!r}")
    if reasons:
        classes.add(2)
    by_n = {b.n: b for b in blocks}
    for sentence in split_sentences(answer):
        cited = [by_n[int(n)] for n in MARKER.findall(sentence) if int(n) in by_n]
        if not cited:
            continue
        claim = strip_markers(sentence)
        refs = "".join(f"[{b.n}]" for b in cited)
        findings = align(claim, [(b.n, b.text) for b in cited], question)
        found += findings
        for f in findings:
            classes.add(f.cls)
            reasons.append(f"{claim!r}: {f.describe(refs)}")
        result = support(claim, [b.text for b in cited])
        if result.missing_numbers and not any(f.kind == "number" for f in findings):
            classes.add(2)
            reasons.append(f"{claim!r}: number(s) {', '.join(result.missing_numbers)} not in {refs}")
        elif not result.supported:
            classes.add(2)
            reasons.append(
                f"{claim!r}: only {result.ratio:.0%} of its content is in {refs} "
                f"(missing: {', '.join(result.missing_terms[:6])})"
            )
    verdict = next((c for c in (3, 1, 2) if c in classes), 0)
    return Verdict(verdict, reasons, findings=found)


def verify(
    answer: str, docs: list[Evidence], faq: list[FaqEvidence], *, question: str | None = None
) -> Verdict:
    """The offline verdict of an answer given the evidence it was drafted from.

    ``question`` (the comment) lets a short answer that leans on it ("小笠原諸島です[1]。")
    be checked against the slot the question asks about.
    """
    return check_answer(answer, numbered_blocks(docs, faq), question)
