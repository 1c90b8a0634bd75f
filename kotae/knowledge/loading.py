"""Loading a knowledge base: check, store, index. Shared by ``kotae kb load``,
``kotae replay --kb`` and ``kotae demo``."""

from __future__ import annotations

from typing import Any

from kotae.knowledge.embeddings import embedder_for
from kotae.knowledge.index import Progress, build_index, index_is_current
from kotae.knowledge.records import KBRecord
from kotae.knowledge.store import KnowledgeStore
from kotae.settings import Settings


def load_knowledge_base(
    records: list[KBRecord], name: str, settings: Settings, progress: Progress | None = None
) -> dict[str, Any]:
    """Upsert ``records`` into the knowledge base ``name`` and bring its index up to date.

    Idempotent: the same records again change nothing and rebuild nothing; a changed
    record re-embeds only its own chunks. ``progress(done, total)`` follows the
    embedding of the new and changed chunks.
    """
    store = KnowledgeStore(settings.kb_dir, name)
    report = store.load(records).as_dict()
    embedder = embedder_for(
        settings.embedding_model,
        api_key=settings.openai_api_key.get_secret_value() if settings.openai_api_key else None,
    )
    if index_is_current(store, embedder.model_id, settings.qdrant_url, settings.qdrant_collection):
        report["index"] = {"rebuilt": False, "model": embedder.model_id}
    else:
        built = build_index(
            store, embedder, qdrant_url=settings.qdrant_url, collection=settings.qdrant_collection, progress=progress
        )
        report["index"] = {"rebuilt": True, **built.__dict__}
    return report
