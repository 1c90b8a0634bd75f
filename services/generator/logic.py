"""What the generator does: a short, speakable answer with a citation after every claim.

This module holds the offline method, ``extractive``: it quotes the sentences
of the evidence that best answer the question, each followed by the number of
the block it came from. It never writes a word that is not in the evidence, so
the comment (and any instruction hidden in it) can only choose *which*
sentences are quoted. When no sentence shares a content word with the question,
or none is in the comment's language, it says the fixed not-found sentence.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from kotae.citations import Block, cited_numbers, citation_check, numbered_blocks, strip_markers
from kotae.contracts import Citation, CitationCheck, CommentV1, ModelCall, RerankV1
from kotae.knowledge.text import search_tokens, split_sentences

METHOD = "extractive"

NOT_FOUND = {
    "ja": "ごめんなさい、その質問にお答えできる情報が手元の資料にありませんでした。",
    "en": "Sorry, my documents don't cover that question.",
}


@dataclass(frozen=True)
class Draft:
    answer: str
    speech: str
    citations: list[Citation]
    check: CitationCheck
    not_found: bool
    method: str = METHOD
    used: list[int] = field(default_factory=list)
    prompt_version: str | None = None
    calls: list[ModelCall] = field(default_factory=list)


def not_found_draft(lang: str, block_count: int, *, method: str = METHOD, **extra: object) -> Draft:
    """The fixed not-found sentence: it claims nothing, so it cites nothing."""
    text = NOT_FOUND[lang]
    return Draft(text, text, [], citation_check(text, block_count, exempt=(text,)), not_found=True, method=method, **extra)  # type: ignore[arg-type]


def fit_spoken(answer: str, lang: str, max_chars: int) -> str:
    """Whole sentences of ``answer`` from the start while the spoken text fits ``max_chars``.

    The first sentence is always kept (the verifier still checks it); later
    sentences that would make the answer too long to say are left out.
    """
    sentences = split_sentences(answer)
    if not sentences:
        return answer.strip()
    sep = "" if lang == "ja" else " "
    kept = [sentences[0]]
    for sentence in sentences[1:]:
        if len(strip_markers(sep.join([*kept, sentence]))) > max_chars:
            break
        kept.append(sentence)
    return sep.join(kept)


def draft_from_text(answer: str, blocks: list[Block], *, method: str, **extra: object) -> Draft:
    """A draft whose citations are the [N] markers of ``answer`` that point at a block."""
    by_n = {b.n: b for b in blocks}
    used = sorted({n for n in cited_numbers(answer) if n in by_n})
    citations = [
        Citation(n=n, doc_id=by_n[n].record_id, chunk_id=by_n[n].chunk_id, source=by_n[n].source, slide=by_n[n].slide)
        for n in used
    ]
    return Draft(
        answer=answer,
        speech=strip_markers(answer),
        citations=citations,
        check=citation_check(answer, len(blocks)),
        not_found=False,
        method=method,
        used=used,
        **extra,  # type: ignore[arg-type]
    )


@dataclass(frozen=True)
class _Candidate:
    block: Block
    sentence: str
    score: float
    rank: int  # order of the block, then of the sentence inside it


def _cite(sentence: str, n: int) -> str:
    """Put ``[n]`` before the sentence's closing punctuation (Japanese) or after it."""
    m = re.search(r"[。．!?！？.]+$", sentence)
    if m and sentence[m.start() - 1 : m.start()] != "]":
        return f"{sentence[: m.start()]}[{n}]{sentence[m.start():]}"
    return f"{sentence}[{n}]"


# What a question asks for, and the shape of a sentence that can answer it.
_ASKS = [
    (re.compile(r"いくら|幾ら|費用|予算|料金|値段|how much|cost|price|fee|budget", re.I), re.compile(r"\d[\d,.]*\s*(万|億|千)?\s*(円|yen|ドル)|¥|無料|free", re.I)),
    (re.compile(r"いつ|何日|何月|何時|when|what time|what date", re.I), re.compile(r"\d+\s*(年|月|日|時)|\d{1,2}:\d{2}|a\.m\.|p\.m\.|January|February|March|April|May|June|July|August|September|October|November|December", re.I)),
    (re.compile(r"何人|何か所|何カ所|何個|何台|何本|いくつ|how many|number of", re.I), re.compile(r"\d+\s*(人|か所|カ所|ヶ所|個|台|本|校|件|つ)|\b\d+\b|\b(one|two|three|four|five|six|seven|eight|nine|ten)\b", re.I)),
    (re.compile(r"どこ|どの場所|where", re.I), re.compile(r"駅|町|市役所|庁舎|場所|プラザ|公園|港|\bat\b|\bin\b", re.I)),
]


def _asks_for(question: str) -> re.Pattern[str] | None:
    """The shape of fact the question asks for (an amount, a date, a count, a place), if any."""
    for asks, shape in _ASKS:
        if asks.search(question):
            return shape
    return None


def _candidates(question: list[str], blocks: list[Block], lang: str, raw_question: str = "") -> list[_Candidate]:
    sentences = [(b, s) for b in blocks for s in split_sentences(_quotable(b))]
    token_sets = [set(search_tokens(s)) for _, s in sentences]
    df: dict[str, int] = {}
    for toks in token_sets:
        for t in toks:
            df[t] = df.get(t, 0) + 1
    n = max(1, len(sentences))
    q = set(question)
    overlaps = [sum(math.log(1 + n / df[t]) for t in q & toks) for toks in token_sets]
    block_best: dict[int, float] = {}
    for (block, _), overlap in zip(sentences, overlaps):
        block_best[block.n] = max(block_best.get(block.n, 0.0), overlap)
    shape = _asks_for(raw_question)
    out = []
    for rank, ((block, sentence), overlap) in enumerate(zip(sentences, overlaps)):
        if (block.lang or lang) != lang or block_best[block.n] <= 0:
            continue
        # A sentence holding the kind of fact asked for ("いくら" → an amount) is
        # worth most of its block's best match even when it repeats no word of the question.
        if shape is not None and shape.search(sentence):
            overlap += 0.75 * block_best[block.n]
        if overlap <= 0:
            continue
        # Earlier (better-ranked) blocks win ties.
        out.append(_Candidate(block, sentence, overlap / (1 + 0.15 * (block.n - 1)), rank))
    return out


def _quotable(block: Block) -> str:
    """The text of a block that may be quoted: an FAQ's answer, a document's body."""
    if block.kind == "faq":
        return block.text.split("\n", 1)[1] if "\n" in block.text else block.text
    lines = block.text.splitlines()
    # Chunks of a sectioned document start with their heading; a heading is not a claim.
    if len(lines) > 1 and not re.search(r"[。.!?！？]$", lines[0].strip()):
        lines = lines[1:]
    return "\n".join(lines)


def _same_content(a: str, b: str) -> bool:
    """Two sentences that say nearly the same thing (a document and its FAQ often do)."""
    ta, tb = set(search_tokens(a)), set(search_tokens(b))
    if not ta or not tb:
        return a == b
    return len(ta & tb) / len(ta | tb) >= 0.6


def extractive_answer(comment: CommentV1, rerank: RerankV1, *, max_sentences: int, max_chars: int | None = None) -> Draft:
    """Quote the best-matching evidence sentences, each with its citation.

    Example::

        draft = extractive_answer(comment, rerank, max_sentences=2)
        draft.answer   # "0〜2歳児の保育料は月額1万5千円を上限にします[1]。"
    """
    blocks = numbered_blocks(rerank.docs, rerank.faq)
    lang = comment.lang
    question = search_tokens(comment.normalized)
    ranked = sorted(_candidates(question, blocks, lang, comment.normalized), key=lambda c: (-c.score, c.rank))
    if not ranked:
        return not_found_draft(lang, len(blocks))
    best = ranked[0].score
    chosen = [ranked[0]]
    for cand in ranked[1:]:
        if len(chosen) >= max_sentences:
            break
        if cand.score >= 0.5 * best and not any(_same_content(cand.sentence, c.sentence) for c in chosen):
            chosen.append(cand)
    chosen.sort(key=lambda c: c.rank)
    sep = "" if lang == "ja" else " "
    answer = sep.join(_cite(c.sentence, c.block.n) for c in chosen)
    if max_chars is not None:
        answer = fit_spoken(answer, lang, max_chars)
    return draft_from_text(answer, blocks, method=METHOD)
