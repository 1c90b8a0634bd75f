"""The generator's model method: a persona prompt over numbered, sourced evidence blocks.

The system prompt (``prompts/generate.v1.txt``) carries the persona and the
rules; the user message carries the evidence (documents, then FAQ, numbered as
everywhere else) and the viewer's comment, each fenced as data. The reply is
plain text with ``[N]`` markers. What the model says is never trusted here: the
citation check runs on it, and the verifier checks every claim downstream.
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

from kotae.citations import Block, numbered_blocks
from kotae.contracts import CommentV1, ModelCall, RerankV1
from kotae.prompts import load_prompt
from kotae.providers import ChatModel, ModelUnavailable
from kotae.services.generator.logic import NOT_FOUND, Draft, draft_from_text, fit_spoken, not_found_draft
from kotae.services.generator.persona import Persona

METHOD = "model"
PROMPTS = Path(__file__).parent / "prompts"
PROMPT = "generate.v1"
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


async def model_answer(
    comment: CommentV1,
    rerank: RerankV1,
    model: ChatModel,
    persona: Persona,
    *,
    max_sentences: int,
    prompt_version: str = PROMPT,
) -> Draft:
    """Draft an answer with ``model``; an empty reply counts as the model being unavailable."""
    blocks = numbered_blocks(list(rerank.docs), list(rerank.faq))
    reply = await model.acomplete(
        system=system_prompt(persona, comment.lang, max_sentences, prompt_version),
        user=render_user(comment, blocks),
        max_tokens=400,
    )
    text = " ".join(reply.text.split()) if comment.lang == "en" else reply.text.strip().replace("\n", "")
    call: ModelCall = reply.call("generator", prompt_version)
    if not text:
        raise ModelUnavailable(f"{model.name}: empty reply")
    if is_not_found(text):
        return not_found_draft(comment.lang, len(blocks), method=METHOD, prompt_version=prompt_version, calls=[call])
    text = fit_spoken(text, comment.lang, persona.max_spoken_chars[comment.lang])
    return draft_from_text(text, blocks, method=METHOD, prompt_version=prompt_version, calls=[call])
