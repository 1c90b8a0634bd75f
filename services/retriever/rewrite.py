"""Query rewriting: with a chat model configured, each comment is also rewritten into
a standalone search query (seed 001), and both are searched.

Offline (no ``KOTAE_REWRITE_MODEL``) the comment is only normalised (NFKC,
widths, chat noise). The comment itself always stays the question that is
answered. A rewrite that fails or looks wrong is skipped — the original comment
is still searched — so a model outage degrades retrieval instead of stopping it.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import structlog

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


class QueryRewriter:
    """Rewrites a chat comment into one standalone search query."""

    def __init__(self, model: ChatModel, prompt_version: str = PROMPT) -> None:
        self.model = model
        self.prompt_version = prompt_version
        self.system = load_prompt(prompt_version)

    @classmethod
    def from_settings(cls, settings: Settings) -> "QueryRewriter | None":
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

    def rewrite(self, comment: str) -> str | None:
        """The rewritten query, or None when the model failed or answered with something unusable."""
        try:
            reply = self.model.complete(system=self.system, user=comment, max_tokens=80)
        except ModelUnavailable as exc:
            log.warning("rewrite.unavailable", model=self.model.name, error=str(exc)[:200])
            return None
        except Exception as exc:  # a reply the SDK could not parse: same as no rewrite
            log.warning("rewrite.failed", model=self.model.name, error=f"{type(exc).__name__}: {exc}"[:200])
            return None
        query = " ".join(reply.text.split()).strip().strip("「」\"'")
        if not query or len(query) > MAX_QUERY_CHARS or query == comment:
            return None
        return query
