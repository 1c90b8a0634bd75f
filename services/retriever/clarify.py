"""The clarify round trip: ask back, then reuse the candidates when the viewer replies.

When the gate lands in the grey zone, the retriever asks which topic the viewer
means and stores the candidate documents in a JetStream key-value bucket under
(stream, author), with a TTL (``KOTAE_CLARIFY_TTL_S``). When the same viewer
writes again before it expires, their reply picks among the stored candidates —
no new search, no re-embedding of the joined text — and the original question
plus the reply becomes the question that is answered.
"""

from __future__ import annotations

import hashlib
from typing import Any

from pydantic import BaseModel

from kotae.contracts import Evidence, FaqEvidence
from kotae.knowledge.sparse import char_terms
from kotae.knowledge.text import search_tokens

BUCKET = "kotae_clarify"


class PendingClarify(BaseModel):
    """What an ask-back left for the viewer's reply."""

    comment_id: str
    question: str
    kb: str
    docs: list[Evidence]
    faq: list[FaqEvidence] = []


def key_for(stream_id: str, author: str) -> str:
    """A KV key for (stream, author); authors are hashed, keys allow only a few characters."""
    digest = hashlib.sha256(f"{stream_id}\x00{author}".encode()).hexdigest()[:32]
    return f"c.{digest}"


def _overlap(reply: str, text: str) -> float:
    words = set(search_tokens(reply))
    if words and words & set(search_tokens(text)):
        return len(words & set(search_tokens(text))) / len(words) + 1.0
    chars = {t for t in char_terms(reply) if len(t) == 2}
    if not chars:
        return 0.0
    return len(chars & set(char_terms(text))) / len(chars)


def pick_candidates(reply: str, pending: PendingClarify) -> list[Evidence]:
    """The stored candidates the reply points at, best first; [] when it names none of them.

    Example::

        pick_candidates("バスの方", pending)  # → [Evidence(doc_id="bus-fare-2027", …)]
    """
    scored = [(max(_overlap(reply, d.title), _overlap(reply, d.text) * 0.5), i, d) for i, d in enumerate(pending.docs)]
    scored = [s for s in scored if s[0] >= 0.34]
    scored.sort(key=lambda s: (-s[0], s[1]))
    return [d for _, _, d in scored]


class ClarifyStore:
    """Pending ask-backs in a JetStream KV bucket with a TTL."""

    def __init__(self, kv: Any) -> None:
        self.kv = kv

    @classmethod
    async def open(cls, js: Any, ttl_s: float, replicas: int = 1) -> "ClarifyStore":
        from nats.js.api import KeyValueConfig
        from nats.js.errors import BucketNotFoundError

        try:
            kv = await js.key_value(BUCKET)
        except BucketNotFoundError:
            kv = await js.create_key_value(KeyValueConfig(bucket=BUCKET, ttl=ttl_s, history=1, replicas=replicas))
        return cls(kv)

    async def get(self, stream_id: str, author: str) -> PendingClarify | None:
        from nats.js.errors import KeyDeletedError, KeyNotFoundError

        try:
            entry = await self.kv.get(key_for(stream_id, author))
        except (KeyNotFoundError, KeyDeletedError):
            return None
        if not entry.value:
            return None
        return PendingClarify.model_validate_json(entry.value)

    async def put(self, stream_id: str, author: str, pending: PendingClarify) -> None:
        await self.kv.put(key_for(stream_id, author), pending.model_dump_json().encode())

    async def delete(self, stream_id: str, author: str) -> None:
        from nats.js.errors import KeyNotFoundError

        try:
            await self.kv.delete(key_for(stream_id, author))
        except KeyNotFoundError:
            pass
