"""Query rewriting: with a chat model configured, each comment is also rewritten into
a standalone search query (seed 001), and both are searched.

Offline (no ``KOTAE_REWRITE_MODEL``) the comment is only normalised (NFKC,
widths, chat noise). The comment itself stays the question that is answered; the
rewrite travels with it (``CommentV1.rewrite``) as a second wording of that question,
so a colloquial comment (親父がテレビの音めっちゃ大きくしてて…) can be answered in the records'
words. A rewrite that fails or looks wrong is skipped — the original comment is still
searched — so a model outage degrades retrieval instead of stopping it. A rewrite that
drops a name or a number of the comment is another question, and is skipped too: asked
about 青葉さん's pay, a rewrite about pay in general would let an answer about anyone's
pay through.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import structlog

from kotae.contracts import ModelCall
from kotae.language.terms import key_terms
from kotae.language.text import normalize
from kotae.model_reply import one_line
from kotae.providers import ChatModel, ModelUnavailable
from kotae.settings import Settings

PROMPTS = Path(__file__).parent / "prompts"
PROMPT = "rewrite.v1"
MAX_QUERY_CHARS = 200

log = structlog.get_logger("kotae.retriever.rewrite")


@lru_cache(maxsize=8)
def load_prompt(name: str) -> str:
    """A prompt file next to this stage, by versioned name."""
    return (PROMPTS / f"{name}.txt").read_text(encoding="utf-8").strip()


@dataclass(frozen=True)
class Rewritten:
    """What one rewrite gave: the query to search too (None: none usable), and the model call it cost."""

    query: str | None
    calls: list[ModelCall] = field(default_factory=list)


class QueryRewriter:
    """Rewrites a chat comment into one standalone search query."""

    def __init__(self, model: ChatModel, prompt_version: str = PROMPT) -> None:
        self.model = model
        self.prompt_version = prompt_version
        self.system = load_prompt(prompt_version)

    @classmethod
    def from_settings(cls, settings: Settings) -> QueryRewriter | None:
        if not settings.rewrite_model:
            return None
        spec = settings.rewrite_model
        anthropic = spec.startswith("anthropic:")
        key = settings.anthropic_api_key if anthropic else settings.openai_api_key
        model = ChatModel.from_spec(
            spec,
            setting="KOTAE_REWRITE_MODEL",
            api_key=key.get_secret_value() if key else None,
            timeout_s=settings.model_timeout_s,
            base_url=settings.anthropic_base_url if anthropic else settings.openai_base_url,
        )
        return cls(model)

    def rewrite(self, comment: str, *, keep: Sequence[str] = ()) -> Rewritten:
        """The rewritten query (None when the model failed or answered with something unusable) and its call.

        ``keep``: words of the comment the rewrite must keep besides its names and numbers — the
        terms no record has (消費税): a rewrite without them asks about something the records do have.
        """
        try:
            reply = self.model.complete(system=self.system, user=comment, max_tokens=80)
        except ModelUnavailable as exc:
            log.warning("rewrite.unavailable", model=self.model.name, error=str(exc)[:200])
            return Rewritten(None)
        except Exception as exc:  # a reply the SDK could not parse: same as no rewrite
            log.warning("rewrite.failed", model=self.model.name, error=f"{type(exc).__name__}: {exc}"[:200])
            return Rewritten(None)
        query = one_line(reply.text)
        lost = dropped(comment, query, keep=keep) if query else []
        if not query or len(query) > MAX_QUERY_CHARS or query == comment or lost:
            why = (
                "empty"
                if not query
                else "too long"
                if len(query) > MAX_QUERY_CHARS
                else "unchanged"
                if query == comment
                else "dropped " + "、".join(f"「{w}」" for w in lost)
            )
            log.info("rewrite.unusable", model=self.model.name, why=why)
            return Rewritten(None, [reply.call("retriever", self.prompt_version, outcome=f"unusable: {why}")])
        return Rewritten(query, [reply.call("retriever", self.prompt_version)])


_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def dropped(comment: str, query: str, *, keep: Sequence[str] = ()) -> list[str]:
    """The names and numbers of ``comment`` (and the words ``keep``) that ``query`` leaves out; the
    prompt asks to keep them all.

    Example::

        >>> dropped("青葉さんの給料って20%カット？", "知事の給与は何%削減されますか")
        ['青葉', '20']
        >>> dropped("消費税は下げてくれるの？", "宿泊税を下げる予定はありますか", keep=["消費税"])
        ['消費税']
    """
    said = normalize(query).lower().replace(",", "")
    names = [t.surface for t in key_terms(comment) if t.proper and t.surface.lower() not in said]
    numbers = [n for n in _NUMBER.findall(normalize(comment)) if n.replace(",", "") not in said]
    kept = [w for w in keep if normalize(w).lower() not in said]
    return list(dict.fromkeys([*names, *numbers, *kept]))
