"""Pending ask-backs: what the retriever asked a viewer, kept until they reply.

When the retriever's gate lands in the grey zone it asks which topic the viewer
means and stores the candidate documents in a JetStream key-value bucket under
(stream, author) with a TTL (``KOTAE_CLARIFY_TTL_S``). Ingest admits that
viewer's next line even when it is not a question ("運賃のほう"), and the
retriever answers it from the stored candidates.
"""

from __future__ import annotations

import hashlib
from typing import Any

from pydantic import BaseModel

from kotae.contracts import Evidence, FaqEvidence

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


class ClarifyStore:
    """Pending ask-backs in a JetStream KV bucket with a TTL."""

    def __init__(self, kv: Any) -> None:
        self.kv = kv

    @classmethod
    async def open(cls, js: Any, ttl_s: float, replicas: int = 1) -> ClarifyStore:
        from nats.js.api import KeyValueConfig
        from nats.js.errors import BucketNotFoundError

        try:
            kv = await js.key_value(BUCKET)
        except BucketNotFoundError:
            kv = await js.create_key_value(KeyValueConfig(bucket=BUCKET, ttl=ttl_s, history=1, replicas=replicas))
        return cls(kv)

    async def waiting(self, stream_id: str, author: str) -> bool:
        """True while an ask-back to this viewer awaits their reply."""
        return await self.get(stream_id, author) is not None

    async def get(self, stream_id: str, author: str) -> PendingClarify | None:
        from nats.js.errors import KeyDeletedError, KeyNotFoundError

        try:
            entry = await self.kv.get(key_for(stream_id, author))
        except (KeyNotFoundError, KeyDeletedError):
            return None
        if not entry.value:
            return None
        try:
            return PendingClarify.model_validate_json(entry.value)
        except ValueError:
            # Unreadable (an older format, or damaged): it cannot be answered, so it is
            # forgotten rather than allowed to dead-letter this viewer's comments.
            await self.delete(stream_id, author)
            return None

    async def put(self, stream_id: str, author: str, pending: PendingClarify) -> None:
        await self.kv.put(key_for(stream_id, author), pending.model_dump_json().encode())

    async def delete(self, stream_id: str, author: str) -> None:
        from nats.js.errors import KeyNotFoundError

        try:
            await self.kv.delete(key_for(stream_id, author))
        except KeyNotFoundError:
            pass
