"""What the verifier does: decide whether a draft may be said on stream.

Verdict classes: 0 none; 1 contradicts the knowledge; 2 states what the
knowledge does not say; 3 invents people, events, organisations or concepts.
This module holds the offline method, ``citation_and_support``: the citation
check (unknown [N], uncited sentences) plus, for every sentence, its support in
the blocks it cites — every number must be there and nearly every content word.
It fails closed: anything it cannot establish is a detection, never a pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kotae.citations import MARKER, Block, citation_check, numbered_blocks, strip_markers
from kotae.contracts import Evidence, FaqEvidence
from kotae.grounding import support
from kotae.knowledge.text import split_sentences

METHOD = "citation_and_support"

SAFE_REPLY = {
    "ja": "ごめんなさい、その質問には確かな情報でお答えできないため、回答を控えます。",
    "en": "Sorry, I can't give you a reliable answer to that, so I'll pass on it.",
}


@dataclass(frozen=True)
class Verdict:
    verdict: int
    reasons: list[str] = field(default_factory=list)
    method: str = METHOD

    @property
    def passed(self) -> bool:
        return self.verdict == 0


def check_answer(answer: str, blocks: list[Block]) -> Verdict:
    """Verdict of ``answer`` against the numbered ``blocks`` it may cite."""
    reasons: list[str] = []
    if not answer.strip():
        return Verdict(2, ["empty answer"])
    check = citation_check(answer, len(blocks))
    for n in check.unknown_ids:
        reasons.append(f"[{n}] cites no evidence block (there are {len(blocks)})")
    for sentence in check.uncited_sentences:
        reasons.append(f"uncited claim: {sentence!r}")
    by_n = {b.n: b for b in blocks}
    for sentence in split_sentences(answer):
        cited = [by_n[int(n)] for n in MARKER.findall(sentence) if int(n) in by_n]
        if not cited:
            continue
        result = support(strip_markers(sentence), [b.text for b in cited])
        refs = "".join(f"[{b.n}]" for b in cited)
        if result.missing_numbers:
            reasons.append(
                f"{strip_markers(sentence)!r}: number(s) {', '.join(result.missing_numbers)} not in {refs}"
            )
        elif not result.supported:
            reasons.append(
                f"{strip_markers(sentence)!r}: only {result.ratio:.0%} of its content is in {refs} "
                f"(missing: {', '.join(result.missing_terms[:6])})"
            )
    return Verdict(2 if reasons else 0, reasons)


def verify(answer: str, docs: list[Evidence], faq: list[FaqEvidence]) -> Verdict:
    """The offline verdict of an answer given the evidence it was drafted from."""
    return check_answer(answer, numbered_blocks(docs, faq))
