"""Lexical grounding: how much of a sentence its evidence actually holds.

Used by the verifier's offline method and the evaluator's offline metrics. A
sentence is measured by its content words (IDF-free: every word must be found)
and, strictly, by its numbers: a number missing from the evidence is never
supported.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kotae.language.text import search_tokens


@dataclass(frozen=True)
class Support:
    """Share of a sentence's content words found in its evidence."""

    ratio: float
    terms: int
    missing_terms: list[str] = field(default_factory=list)
    missing_numbers: list[str] = field(default_factory=list)

    @property
    def supported(self) -> bool:
        return not self.missing_numbers and self.ratio >= SUPPORT_THRESHOLD


SUPPORT_THRESHOLD = 0.8


def support(sentence: str, evidence: list[str]) -> Support:
    """How well ``evidence`` supports ``sentence``.

    Example::

        >>> support("保育料は月額1万5千円です", ["保育料は月額1万5千円を上限にします。"]).supported
        True
    """
    terms = set(search_tokens(sentence))
    if not terms:
        return Support(ratio=1.0, terms=0)
    found: set[str] = set()
    for text in evidence:
        found |= set(search_tokens(text))
    missing = sorted(terms - found)
    numbers = [t for t in missing if t.isdigit()]
    return Support(
        ratio=(len(terms) - len(missing)) / len(terms),
        terms=len(terms),
        missing_terms=missing,
        missing_numbers=numbers,
    )
