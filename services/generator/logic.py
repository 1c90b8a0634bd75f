"""What the generator does: a short, speakable answer with a citation after every claim.

This module holds the offline method, ``extractive``: it quotes the sentences
of the evidence that answer the question (sentence_choice.py: those that fill
its slot among those that address what it asks), each followed by the number of
the block it came from. It never writes a word that is not in the evidence, so
the comment (and any instruction hidden in it) can only choose *which*
sentences are quoted. When the evidence is in another language (an English
question over Japanese documents), it quotes the sentence a multilingual
embedding puts nearest the question among those giving the kind of answer asked
for (across_languages.py). When no sentence addresses the question, it says the
fixed not-found sentence, with the reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kotae.citations import Block, citation_check, cited_numbers, numbered_blocks, strip_markers, title_label
from kotae.contracts import Citation, CitationCheck, CommentV1, ModelCall, RerankV1
from kotae.knowledge.embeddings import Embedder
from kotae.language.question_focus import holds_kind, question_focus
from kotae.language.text import search_tokens, split_sentences
from kotae.services.generator.across_languages import choose_across_languages
from kotae.services.generator.sentence_choice import Candidate, Choice, choose

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
    reason: str | None = None  # why nothing was found, for the unanswered outcome
    degraded: str | None = None  # why the model's reply was not used, when the offline method answered instead

    @property
    def not_found_reason(self) -> str:
        """The reason of the ``unanswered`` outcome a not-found draft ends in."""
        detail = self.reason or "the documents do not answer the question"
        return f"not_found: {detail}"


def not_found_draft(lang: str, block_count: int, *, method: str = METHOD, **extra: object) -> Draft:
    """The fixed not-found sentence: it claims nothing, so it cites nothing."""
    text = NOT_FOUND[lang]
    return Draft(
        text, text, [], citation_check(text, block_count, exempt=(text,)), not_found=True, method=method, **extra
    )  # type: ignore[arg-type]


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


def _cite(sentence: str, n: int) -> str:
    """Put ``[n]`` before the sentence's closing punctuation (Japanese) or after it."""
    m = re.search(r"[。．!?！？.]+$", sentence)
    if m and sentence[m.start() - 1 : m.start()] != "]":
        return f"{sentence[: m.start()]}[{n}]{sentence[m.start() :]}"
    return f"{sentence}[{n}]"


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


def _gives_what_was_asked(question: str, picked: Choice) -> bool:
    """Whether ``picked`` quotes something, and the kind of answer ``question`` asks for with a wh-word
    (a rewrite may reword what is asked about, not that: いくら asked, いくつ rewritten, 1機 quoted)."""
    focus = question_focus(question)
    if not picked.chosen or not (focus.explicit and focus.kinds):
        return bool(picked.chosen)
    return any(holds_kind(k, c.sentence) for c in picked.chosen for k in focus.kinds)


def extractive_answer(
    comment: CommentV1,
    rerank: RerankV1,
    *,
    max_sentences: int,
    max_chars: int | None = None,
    embedder: Embedder | None = None,
) -> Draft:
    """Quote the evidence sentences that answer the question, each with its citation.

    The sentences are chosen by :func:`sentence_choice.choose`: the one that fills the
    question's slot best among those that address what it asks, and a second only when it adds
    to the answer — for the rewrite model's wording of the comment (``comment.rewrite``) when
    there is one, else (or when that finds nothing) for the viewer's words. No evidence in the comment's
    language: with ``embedder``, the one sentence :func:`across_languages.choose_across_languages`
    picks. Nothing relevant: the not-found draft, with the reason.

    Example::

        draft = extractive_answer(comment, rerank, max_sentences=2)
        draft.answer   # "0〜2歳児の保育料は月額1万5千円を上限にします[1]。"
    """
    blocks = numbered_blocks(rerank.docs, rerank.faq)
    lang = comment.lang
    sentences = [(b, s) for b in blocks if (b.lang or lang) == lang for s in split_sentences(_quotable(b))]
    if sentences:
        # The rewrite model's wording first: it says in ordinary words what the chat line asks
        # (みおの誕生日はいつ for みおちゃんの生まれた日っていつ〜？, where a debut date would do
        # for the viewer's words); the viewer's own words when it finds nothing.
        wordings = [w for w in (comment.rewrite, comment.normalized) if w]
        picked = choose(wordings[0], sentences, max_sentences=max_sentences)
        if len(wordings) > 1 and not _gives_what_was_asked(comment.normalized, picked):
            picked = choose(wordings[1], sentences, max_sentences=max_sentences)  # and its reason, if none
    elif embedder is not None and blocks:
        picked = choose_across_languages(
            comment.normalized, [(b, s) for b in blocks for s in split_sentences(_quotable(b))], embedder
        )
    else:
        picked = choose(comment.normalized, [], max_sentences=max_sentences)
    if not picked.chosen:
        return not_found_draft(lang, len(blocks), reason=picked.reason)
    said = picked.chosen[0].block.lang or lang  # the language quoted, which may not be the comment's
    sep = "" if said == "ja" else " "

    def spoken(c: Candidate) -> str:
        return title_label(picked.label) + c.sentence if picked.label and c is picked.chosen[0] else c.sentence

    # The best sentence always, with the one it is joined to (alone, either answers another
    # question, which is worse than a long answer); the others, best first, while the answer stays
    # short enough to say. Only then in the evidence's order: cutting in that order dropped the
    # sentence that answers.
    chosen = picked.chosen[:2] if picked.joined else picked.chosen[:1]
    for cand in picked.chosen[len(chosen) :]:
        if any(_same_content(cand.sentence, c.sentence) for c in chosen):
            continue
        if max_chars is not None and len(sep.join(spoken(c) for c in [*chosen, cand])) > max_chars:
            continue
        chosen.append(cand)
    chosen.sort(key=lambda c: c.order)
    answer = sep.join(_cite(spoken(c), c.block.n) for c in chosen)
    return draft_from_text(answer, blocks, method=METHOD)
