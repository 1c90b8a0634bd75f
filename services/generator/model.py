"""The generator's model method: a persona prompt over numbered, sourced evidence blocks.

The system prompt (``prompts/generate.v2.txt`` by default, ``KOTAE_GENERATOR_PROMPT``)
carries the persona and the rules; the user message carries the evidence (documents, then FAQ, numbered as
everywhere else) and the viewer's comment, each fenced as data. The reply is
plain text with ``[N]`` markers, read by :func:`read_answer` (citation variants, a cut
reply, another script). What the model says is never trusted here: the citation check
runs on it, and the verifier checks every claim downstream.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import replace
from pathlib import Path

from kotae.citations import Block, cited_numbers, numbered_blocks
from kotae.contracts import CommentV1, ModelCall, RerankV1
from kotae.language.text import split_sentences
from kotae.model_reply import again, citation_markers, foreign_characters
from kotae.prompts import load_prompt
from kotae.providers import ChatModel, ModelUnavailable
from kotae.services.generator.logic import (
    METHOD as EXTRACTIVE,
    NOT_FOUND,
    Draft,
    draft_from_text,
    extractive_answer,
    fit_spoken,
    not_found_draft,
)
from kotae.services.generator.persona import Persona

METHOD = "model"
PROMPTS = Path(__file__).parent / "prompts"
PROMPT = "generate.v2"
MAX_BLOCK_CHARS = 1500


def system_prompt(persona: Persona, lang: str, max_sentences: int, prompt_version: str = PROMPT) -> str:
    """The rules and the persona, for a comment in ``lang``."""
    return load_prompt(PROMPTS, prompt_version).format(
        name=persona.name,
        first_person=persona.first_person[lang],
        tone=persona.tone[lang],
        max_sentences=max_sentences,
        max_chars=persona.max_spoken_chars[lang],
        not_found=NOT_FOUND[lang],
    )


def render_user(comment: CommentV1, blocks: list[Block]) -> str:
    """Evidence blocks with their sources, then the question, each fenced as data."""
    parts = ["Documents / 資料:"]
    for b in blocks:
        label = "FAQ" if b.kind == "faq" else "document"
        source = f" — source: {b.source}" if b.source else ""
        parts += ["", f"[{b.n}] ({label}) {b.title}{source}".rstrip(), b.text[:MAX_BLOCK_CHARS]]
    parts += ["", f"Question ({comment.lang}) / 質問:", "<<<", comment.text, ">>>"]
    return "\n".join(parts)


def _plain(text: str) -> str:
    return "".join(ch for ch in unicodedata.normalize("NFKC", text) if not ch.isspace())


def is_not_found(reply: str) -> bool:
    """True when the reply is (or contains) one of the fixed not-found sentences."""
    plain = _plain(reply)
    return any(_plain(sentence) in plain for sentence in NOT_FOUND.values())


#: "回答：" / "Answer:" before the answer, which the rules ask the model not to write.
_PREAMBLE = re.compile(r"^\s*(?:回答|答え|Answer|A)\s*[:：]\s*", re.I)


def read_answer(text: str, lang: str, blocks: list[Block], *, cut: bool = False) -> tuple[str, str | None]:
    """The answer in a generator reply, and what makes it unusable (None when nothing does).

    Read through :mod:`kotae.model_reply`: citation variants become ``[N]``; a preamble
    label goes; lines are joined as the language joins them; a reply cut at ``max_tokens``
    loses its unfinished last sentence. Unusable: empty; in another script than the
    question's (characters the evidence does not hold); or, unless it is the not-found
    sentence, citing no block that exists — a reply the verifier could only reject.
    """
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    answer = (" " if lang == "en" else "").join(lines)
    answer = _PREAMBLE.sub("", citation_markers(answer)).strip()
    if cut:
        sentences = split_sentences(answer)
        if len(sentences) > 1:
            answer = ("" if lang == "ja" else " ").join(sentences[:-1])
    if not answer:
        return "", "empty reply" + (" (cut at max_tokens)" if cut else "")
    if is_not_found(answer):
        return answer, None
    foreign = foreign_characters(answer, lang, "".join(b.text + b.title for b in blocks))
    if foreign:
        return answer, f"characters foreign to {lang}: {''.join(foreign[:10])}"
    if not any(1 <= n <= len(blocks) for n in cited_numbers(answer)):
        return answer, "cites no evidence block ([N] after each fact)"
    return answer, None


async def model_answer(
    comment: CommentV1,
    rerank: RerankV1,
    model: ChatModel,
    persona: Persona,
    *,
    max_sentences: int,
    reask: int = 1,
    prompt_version: str = PROMPT,
    final_attempt: bool = False,
) -> Draft:
    """Draft an answer with ``model``, asking again (``reask`` times) while the reply is unusable.

    A reply that stays unusable is not passed on: the offline ``extractive`` method answers
    instead, and the draft says so (``degraded``). A model that is unavailable propagates
    (:class:`ModelUnavailable`) for a later redelivery, unless this is the input's final
    delivery: then the ``extractive`` method answers, ``degraded`` with the reason, as the
    comment is better served by a quoted answer the verifier still checks than by none.
    """
    lang = comment.lang
    blocks = numbered_blocks(list(rerank.docs), list(rerank.faq))
    system = system_prompt(persona, lang, max_sentences, prompt_version)
    user = render_user(comment, blocks)
    calls: list[ModelCall] = []
    problem = ""
    for attempt in range(1 + reask):
        try:
            reply = await model.acomplete(
                system=system, user=user if attempt == 0 else again(user, problem), max_tokens=400
            )
        except ModelUnavailable as exc:
            if not final_attempt:
                raise
            return _extractive_instead(
                comment, rerank, persona, max_sentences, calls, f"generator model unavailable: {exc}"
            )
        text, unusable = read_answer(reply.text, lang, blocks, cut=reply.finish_reason == "length")
        if unusable is not None:
            problem = unusable
            calls.append(reply.call("generator", prompt_version, outcome=f"unusable: {unusable}"))
            continue
        calls.append(reply.call("generator", prompt_version))
        if is_not_found(text):
            return not_found_draft(lang, len(blocks), method=METHOD, prompt_version=prompt_version, calls=calls)
        text = fit_spoken(text, lang, persona.max_spoken_chars[lang])
        return draft_from_text(text, blocks, method=METHOD, prompt_version=prompt_version, calls=calls)
    problem = f"generator model reply unusable after {1 + reask} calls ({problem})"
    return _extractive_instead(comment, rerank, persona, max_sentences, calls, problem)


def _extractive_instead(
    comment: CommentV1, rerank: RerankV1, persona: Persona, max_sentences: int, calls: list[ModelCall], problem: str
) -> Draft:
    """The offline method's answer, marked ``degraded`` with why the model's was not used."""
    max_chars = persona.max_spoken_chars[comment.lang]
    fallback = extractive_answer(comment, rerank, max_sentences=max_sentences, max_chars=max_chars)
    return replace(fallback, calls=calls, degraded=f"{problem}; answered by the {EXTRACTIVE} method")
