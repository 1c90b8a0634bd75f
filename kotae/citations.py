"""Numbered evidence blocks and the programmatic citation check.

The generator numbers the evidence it shows (documents first, then FAQ) and
cites ``[N]`` after every claim; the verifier and the evaluator rebuild the same
numbering from the same message. :func:`citation_check` runs on every draft.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kotae.contracts import CitationCheck, Evidence, FaqEvidence
from kotae.language.text import split_sentences

MARKER = re.compile(r"\[(\d+)\]")


@dataclass(frozen=True)
class Block:
    """One numbered piece of evidence as shown to the generator."""

    n: int
    kind: str  # "doc" or "faq"
    record_id: str
    chunk_id: str | None
    title: str
    text: str
    source: str | None
    slide: int | str | None
    lang: str | None


def faq_question(block: Block) -> list[str]:
    """The question an FAQ block's answer answers (its title), as a list to read the answer with; none for a document."""
    return [block.title] if block.kind == "faq" and block.title else []


def numbered_blocks(docs: list[Evidence], faq: list[FaqEvidence]) -> list[Block]:
    """Documents, then FAQ, numbered from 1."""
    blocks = [
        Block(i, "doc", d.doc_id, d.chunk_id, d.title, d.text, d.source, d.slide, d.lang) for i, d in enumerate(docs, 1)
    ]
    start = len(blocks) + 1
    blocks += [
        Block(start + i, "faq", f.faq_id, None, f.question, f"{f.question}\n{f.answer}", f.source, f.slide, f.lang)
        for i, f in enumerate(faq)
    ]
    return blocks


def cited_numbers(text: str) -> list[int]:
    return [int(n) for n in MARKER.findall(text)]


def strip_markers(text: str) -> str:
    """The answer as it is read aloud: no [N] markers."""
    return re.sub(r"\s*\[\d+\]", "", text).strip()


def _is_exempt(sentence: str, exempt: tuple[str, ...]) -> bool:
    bare = strip_markers(sentence)
    if not bare or bare in exempt:
        return True
    # A line that only introduces a code block or list ("…:") makes no claim.
    return bare.endswith((":", "：")) or bare.startswith("```")


def citation_check(answer: str, block_count: int, *, exempt: tuple[str, ...] = ()) -> CitationCheck:
    """Find [N] markers that point at no block and sentences that cite nothing.

    Example::

        >>> citation_check("保育料は無料です[1]。詳しくは後で。", 1).uncited_sentences
        ['詳しくは後で。']
    """
    unknown = sorted({n for n in cited_numbers(answer) if n < 1 or n > block_count})
    uncited: list[str] = []
    in_code = False
    for sentence in split_sentences(answer):
        if sentence.startswith("```"):
            in_code = not in_code
            continue
        if in_code or _is_exempt(sentence, exempt):
            continue
        if not MARKER.search(sentence):
            uncited.append(sentence)
    return CitationCheck(ok=not unknown and not uncited, unknown_ids=unknown, uncited_sentences=uncited)


_LABEL = re.compile(r"^【([^【】]{1,60})】")


def title_label(title: str) -> str:
    """The label that names the document a quoted sentence comes from: 【ラオス】."""
    return f"【{title}】"


def without_title_label(sentence: str, blocks: list[Block]) -> str:
    """``sentence`` less a leading 【title】 label naming one of ``blocks``: the label repeats a title,
    which claims nothing beyond the document it names.

    Example::

        >>> b = Block(1, "doc", "laos", None, "ラオス", "…", None, None, "ja")
        >>> without_title_label("【ラオス】内陸国である[1]。", [b])
        '内陸国である[1]。'
    """
    m = _LABEL.match(sentence)
    if m and any(b.title and m.group(1) == b.title for b in blocks):
        return sentence[m.end() :]
    return sentence
