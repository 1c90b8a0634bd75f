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


def not_loaded(settings: Settings, name: str) -> str | None:
    """Why the stages could not search the knowledge base ``name``; None when it is loaded.

    A stack started without one answers nothing: each comment fails after its retries.
    What is checked is what the retriever opens: the records stored under KOTAE_DATA_DIR,
    or the knowledge base's entry in the Qdrant server of KOTAE_QDRANT_URL.
    """
    if settings.qdrant_url:
        from kotae.knowledge.index import ServerBackend

        key = settings.qdrant_api_key.get_secret_value() if settings.qdrant_api_key else None
        try:
            backend = ServerBackend.connect(settings.qdrant_url, settings.qdrant_collection, key)
            try:
                found = backend.meta(name) is not None
            finally:
                backend.close()
        except Exception as exc:  # unreachable, refused, another server: the stages would fail alike
            return f"the Qdrant server at {settings.qdrant_url} cannot be read ({type(exc).__name__}: {exc})"
        return None if found else f"knowledge base {name!r} is not in {settings.qdrant_url}"
    store = KnowledgeStore(settings.kb_dir, name)
    if store.digest() is None or not store.exists():
        return f"knowledge base {name!r} is not loaded (nothing in {store.dir})"
    return None
